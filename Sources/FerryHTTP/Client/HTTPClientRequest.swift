/// One request for `HTTPClient`: method, endpoint, target, fields and an optional body. The
/// client adds `Host`, `Content-Length`, `Accept-Encoding` (for gzip) and `Connection`
/// fields itself; `headers` are written as given.
public struct HTTPClientRequest: Sendable {
    /// The method, e.g. `GET`.
    public var method: String
    /// Where to send it.
    public var endpoint: HTTPEndpoint
    /// The request target: path and query, percent-encoded (`/db/_changes?since=0`).
    public var target: String
    /// Header fields, in order.
    public var headers: [(name: String, value: String)]
    /// The body; nil for none.
    public var body: [UInt8]?
    /// The longest silence, in seconds, while waiting for the response's bytes (nil: the
    /// client's `readTimeout`). A feed that sends heartbeats sets more than their interval.
    public var timeout: Double?

    /// A request with these parts.
    public init(method: String, endpoint: HTTPEndpoint, target: String, headers: [(name: String, value: String)] = [],
                body: [UInt8]? = nil, timeout: Double? = nil) {
        self.method = method
        self.endpoint = endpoint
        self.target = target
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// A request for an `http://` or `https://` URL; user information in it is ignored (send
    /// credentials as a field).
    public init(method: String, url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8]? = nil) throws(HTTPClientError) {
        guard let (endpoint, target, _, _) = HTTPEndpoint.split(url) else { throw .invalidURL(url) }
        self.init(method: method, endpoint: endpoint, target: target, headers: headers, body: body)
    }

    /// The first value of a header field, by case-insensitive name.
    public subscript(name: String) -> String? {
        headers.first { $0.name.caseInsensitiveEquals(name) }?.value
    }
}
