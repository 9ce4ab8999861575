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

    public static func == (a: HTTPRequestHead, b: HTTPRequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.minorVersion == b.minorVersion
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
            && a.keepAlive == b.keepAlive && a.expectsContinue == b.expectsContinue && a.body == b.body
    }
}

extension String {
    /// ASCII case-insensitive equality (header names and tokens are ASCII).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) }
    }
}
