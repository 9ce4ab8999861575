/// The head of an HTTP/1.x request as the decoder read it (Protocol/http.md, "Requests").
public struct HTTPRequestHead: Sendable, Equatable {
    /// The method token, case-sensitive as RFC 9110 says (`GET`, `PUT`, ...).
    public var method: String
    /// The request target as sent (origin form `/db/doc?x=1`, or `*`, or absolute form).
    public var target: String
    /// The minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    /// The header fields in the order received, names as sent.
    public var headers: [(name: String, value: String)]

    /// Whether the connection stays open after the response: HTTP/1.1 unless `Connection:
    /// close`; HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool
    /// Whether the client waits for `100 Continue` before sending its body (`Expect:
    /// 100-continue` on an HTTP/1.1 request with a body).
    public var expectsContinue: Bool
    /// How the body is framed.
    public var body: BodyFraming

    /// How a request's body is delimited (RFC 9112 §6).
    public enum BodyFraming: Sendable, Equatable {
        /// No body.
        case none
        /// Exactly this many bytes (`Content-Length`).
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
    }

    /// The first value of a header field, by case-insensitive name.
    public subscript(name: String) -> String? {
        headers.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of a header field, by case-insensitive name, in order.
    public func values(of name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// The comma-separated tokens of every `name` field, trimmed (`Connection: keep-alive, Upgrade`).
    public func tokens(_ name: String) -> [String] { HTTPHeaders.tokens(of: values(of: name)) }

    /// The fields as `HTTPHeaders`.
    public var fields: HTTPHeaders { HTTPHeaders(headers.map { ($0.name, $0.value) }) }

    /// The path part of the target, without the query.
    public var path: String { String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "") }

    /// The query string after `?`, if any.
    public var query: String? {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count > 1 ? String(parts[1]) : nil
    }

    /// Parses one complete request head (without its final CRLF CRLF, as `HTTPHeadAccumulator`
    /// returns it) by the decoder's rules; the error names the status to answer with.
    public static func parse(_ head: ArraySlice<UInt8>, limits: HTTPLimits = HTTPLimits()) throws(HTTPError) -> HTTPRequestHead {
        try HTTPHeadReader.parse(head, limits: limits)
    }

    public static func == (a: HTTPRequestHead, b: HTTPRequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.minorVersion == b.minorVersion
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
            && a.keepAlive == b.keepAlive && a.expectsContinue == b.expectsContinue && a.body == b.body
    }
}
