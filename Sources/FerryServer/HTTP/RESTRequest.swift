import FerryHTTP
import FerryNet
import Synchronization

/// One HTTP request as the REST layer sees it: the head, the whole body (already limited by
/// `HTTPLimits.maxBodySize`), the path split and percent-decoded, the query parsed, and who
/// sent it.
public struct RESTRequest: Sendable {
    /// The head as decoded.
    public let head: FerryHTTP.HTTPRequestHead
    /// The body, de-chunked.
    public let body: [UInt8]
    /// The path's segments, percent-decoded (`/db/doc%2Fx` → `["db", "doc/x"]`).
    public let segments: [String]
    /// The query's parameters in order, percent-decoded, `+` read as a space.
    public let query: [(name: String, value: String)]
    /// The peer's address.
    public let remoteAddress: SocketAddress?
    /// The client certificate, when the connection runs mutual TLS.
    public let peerCertificate: TLSCertificate?
    /// Whether the request came over TLS (a session cookie is then marked `Secure`, and a
    /// redirect names `https`).
    public let isSecure: Bool
    /// Who the request proved to be, once the router has authenticated it (for its access-log
    /// line; a box, because the request is a value passed down by copy).
    let provenUser = ProvenUser()

    /// The method (`GET`, `PUT`, ...).
    public var method: String { head.method }

    /// Parses the target of `head`; nil when it is not origin-form or its escapes are broken.
    public init?(head: FerryHTTP.HTTPRequestHead, body: [UInt8], remoteAddress: SocketAddress? = nil,
                 peerCertificate: TLSCertificate? = nil, isSecure: Bool = false) {
        self.head = head
        self.isSecure = isSecure
        self.body = body
        self.remoteAddress = remoteAddress
        self.peerCertificate = peerCertificate
        let target = head.target
        guard target.hasPrefix("/") else { return nil }
        let pathPart: Substring
        let queryPart: Substring?
        if let q = target.firstIndex(of: "?") {
            pathPart = target[..<q]
            queryPart = target[target.index(after: q)...]
        } else {
            pathPart = target[...]
            queryPart = nil
        }
        var segments: [String] = []
        for raw in pathPart.split(separator: "/", omittingEmptySubsequences: true) {
            guard let s = PercentEncoding.decode(raw, plusIsSpace: false) else { return nil }
            segments.append(s)
        }
        self.segments = segments
        var query: [(String, String)] = []
        for pair in (queryPart ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = PercentEncoding.decode(parts[0], plusIsSpace: true),
                  let value = PercentEncoding.decode(parts.count > 1 ? parts[1] : "", plusIsSpace: true) else { return nil }
            query.append((name, value))
        }
        self.query = query
    }

    /// The last value of a query parameter.
    public subscript(query name: String) -> String? {
        query.last { $0.name == name }?.value
    }

    /// A header field's first value.
    public func header(_ name: String) -> String? { head[name] }

    /// The user a request proved to be (`RESTRouter.authentication` sets it).
    final class ProvenUser: Sendable {
        let name = Mutex<String?>(nil)
    }

    /// The most bytes a compressed request body may inflate to (the HTTP layer's own body limit).
    public static let maxDecodedBodySize = 64 * 1024 * 1024

    /// The body with its `Content-Encoding` undone, as CouchDB reads a JSON or form body:
    /// `gzip` (the default of one major client SDK) is inflated, `identity` is as sent, any
    /// other coding is 415, and bytes that are not gzip are 400. Attachment bodies are not
    /// read through this: their coding is kept with them.
    public func decodedBody(limit: Int = RESTRequest.maxDecodedBodySize) throws(RESTError) -> [UInt8] {
        guard let coding = header("Content-Encoding")?.trimmingASCIIWhitespace().lowercased(), !coding.isEmpty, coding != "identity" else {
            return body
        }
        guard coding == "gzip" || coding == "x-gzip" else {
            throw .badContentType("\(coding) is not a supported content encoding.")
        }
        do { return try Gzip.decode(body, limit: limit) } catch {
            switch error {
            case .tooLarge(let n): throw RESTError(413, "too_large", "the request body inflates past \(n) bytes")
            case .malformed: throw .badRequest("Request body is not properly gzipped.")
            }
        }
    }
}
