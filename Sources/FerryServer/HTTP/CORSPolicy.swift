/// Cross-origin resource sharing as CouchDB's `[cors]` section configures it (Protocol/rest.md,
/// "CORS"), so a web page on another origin can read and write with `fetch` and a session
/// cookie. Off unless origins are given.
///
/// What CouchDB 3.5 answers, and so what this does:
/// - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from an allowed
///   origin, for an allowed method and allowed request headers, is `204` with the `Allow-*`
///   fields, before authentication. A preflight that fails any check is not one: it is
///   answered as the plain request it is (often 401), with the fields of a simple request.
/// - Any other request from an allowed origin gets `Access-Control-Allow-Origin` (the origin
///   itself, also when every origin is allowed), `-Allow-Credentials` and `-Expose-Headers`.
/// - A request from another origin gets no CORS fields; the browser then refuses the answer.
public struct CORSPolicy: Sendable, Equatable {
    /// Allowed origins (`scheme://host[:port]`, compared case-insensitively); `*` allows any.
    public var origins: [String]
    /// Whether pages may send cookies and Basic credentials (`Access-Control-Allow-Credentials`).
    public var credentials = false
    /// Methods a preflight may ask for.
    public var methods = CORSPolicy.defaultMethods
    /// Request headers allowed beyond CouchDB's standard list.
    public var headers: [String] = []
    /// How long a browser may cache a preflight's answer, in seconds.
    public var maxAge = 600

    /// CouchDB's methods (`chttpd_cors` `SUPPORTED_METHODS`), in the order it lists them.
    public static let defaultMethods = ["CONNECT", "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "TRACE"]
    /// Request headers always allowed (CouchDB's `SUPPORTED_HEADERS`).
    public static let standardHeaders: Set<String> = [
        "accept", "accept-language", "authorization", "content-length", "content-range", "content-type", "destination",
        "expires", "if-match", "last-modified", "origin", "pragma", "referer", "x-couch-full-commit", "x-couch-id",
        "x-couch-persist", "x-couchdb-www-authenticate", "x-http-method-override", "x-requested-with", "x-couch-request-id",
    ]
    /// Response headers a page may read (CouchDB's `COUCHDB_HEADERS` and `SIMPLE_HEADERS`).
    public static let exposedHeaders = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"

    /// A policy allowing `origins`.
    public init(origins: [String], credentials: Bool = false) {
        self.origins = origins
        self.credentials = credentials
    }

    /// Whether `origin` may make requests.
    public func allows(origin: String) -> Bool {
        origins.contains { $0 == "*" || $0.caseInsensitiveEquals(origin) }
    }

    /// The answer to a preflight request that passes every check, or nil when `request` is
    /// not one (then it is answered as itself).
    public func preflight(_ request: RESTRequest) -> RESTResponse? {
        guard request.method == "OPTIONS", let origin = request.header("Origin"), allows(origin: origin),
              let wanted = request.header("Access-Control-Request-Method"),
              methods.contains(where: { $0.caseInsensitiveEquals(wanted) }) else { return nil }
        let asked = (request.header("Access-Control-Request-Headers") ?? "")
            .split(separator: ",").map { $0.trimmingASCIIWhitespace().lowercased() }.filter { !$0.isEmpty }
        let extra = Set(headers.map { $0.lowercased() })
        guard asked.allSatisfy({ Self.standardHeaders.contains($0) || extra.contains($0) }) else { return nil }
        var fields: [(name: String, value: String)] = []
        if credentials { fields.append(("Access-Control-Allow-Credentials", "true")) }
        fields += [("Access-Control-Allow-Headers", asked.joined(separator: ", ")),
                   ("Access-Control-Allow-Methods", methods.joined(separator: ", ")),
                   ("Access-Control-Allow-Origin", origin),
                   ("Access-Control-Max-Age", String(maxAge))]
        return RESTResponse(status: 204, headers: fields)
    }

    /// The fields an answer to `request` carries: none unless its origin is allowed.
    public func fields(for request: RESTRequest) -> [(name: String, value: String)] {
        guard let origin = request.header("Origin"), allows(origin: origin) else { return [] }
        var fields: [(name: String, value: String)] = []
        if credentials { fields.append(("Access-Control-Allow-Credentials", "true")) }
        fields += [("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", Self.exposedHeaders)]
        return fields
    }
}
