import FerryHTTP
import FerryStore
import FoundationEssentials
import Synchronization

/// A CouchDB database reached over HTTP (Protocol/replication-http.md): JSON requests against
/// `http(s)://host:port/db`, authenticated as CouchDB's replicator does — a `POST /_session`
/// cookie, renewed when the server answers 401, with Basic credentials as the fallback for
/// servers without sessions — and HTTP failures mapped to `ReplicationError`s.
final class CouchRemote: Sendable {
    /// The database's URL without credentials (for messages and the replication ID).
    let url: String
    private let endpoint: HTTPEndpoint
    /// The database's path, percent-encoded, without a trailing slash (`/tasks`).
    private let path: String
    private let client: HTTPClient
    private let credentials: (user: String, password: String)?
    private let extraHeaders: [(name: String, value: String)]
    /// The `AuthSession` cookie from `POST /_session`; nil before login or without sessions.
    private let cookie = Mutex<String?>(nil)
    /// Set when the server has no `_session` (Basic is sent instead).
    private let basicOnly = Mutex(false)
    /// Set when the server has no `_bulk_get` (documents are read with `open_revs` instead).
    private let noBulkGet = Mutex(false)

    /// Whether the server was found to lack `_bulk_get`.
    var lacksBulkGet: Bool { noBulkGet.withLock { $0 } }

    /// Records that the server lacks `_bulk_get`.
    func noteLacksBulkGet() { noBulkGet.withLock { $0 = true } }

    /// The remote database at `url` (`http(s)://[user:password@]host:port/db`).
    init(url: String, client: HTTPClient, authenticator: ReplicatorConfiguration.Authenticator?,
         headers: [String: String]) throws(ReplicationError) {
        guard let (endpoint, target, user, password) = HTTPEndpoint.split(url) else { throw .invalidURL(url) }
        var p = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        while p.hasSuffix("/") && p.count > 1 { p.removeLast() }
        guard p.count > 1 else { throw .invalidURL("\(url): no database name in the path") }
        self.endpoint = endpoint
        path = p
        self.client = client
        self.url = endpoint.description + p
        if case .basic(let u, let pw)? = authenticator {
            credentials = (u, pw)
        } else if let user {
            credentials = (user, password ?? "")
        } else {
            credentials = nil
        }
        extraHeaders = headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// A JSON answer: status and parsed body (`.null` when the body is not JSON).
    struct Answer: Sendable {
        let status: Int
        let json: JSONValue
        let headers: HTTPResponseHead

        /// CouchDB's `reason` (or `error`) of an error answer.
        var reason: String {
            json.objectValue?["reason"]?.stringValue ?? json.objectValue?["error"]?.stringValue ?? "HTTP \(status)"
        }
    }

    /// Sends a request to `db/<sub>` (`sub` percent-encoded, may carry a query; "" for the
    /// database itself) and returns the answer whatever its status; 401 renews the session once.
    func request(_ method: String, _ sub: String, json: JSONValue? = nil, body: [UInt8]? = nil, contentType: String? = nil,
                 timeout: Double? = nil) async throws(ReplicationError) -> Answer {
        let target = sub.isEmpty ? path : path + "/" + sub
        var answer = try await send(method, target, json: json, body: body, contentType: contentType, timeout: timeout)
        if answer.status == 401, credentials != nil {
            try await login(force: true)
            answer = try await send(method, target, json: json, body: body, contentType: contentType, timeout: timeout)
        }
        return answer
    }

    /// A request answered with its raw body (an attachment's bytes, decoded from gzip when the
    /// server sent them so); 401 renews the session once.
    func raw(_ method: String, _ sub: String) async throws(ReplicationError) -> HTTPClientResponse {
        func once() async throws(ReplicationError) -> HTTPClientResponse {
            try await login(force: false)
            let request = HTTPClientRequest(method: method, endpoint: endpoint, target: path + "/" + sub, headers: authHeaders() + extraHeaders)
            do { return try await execute(request) } catch { throw Self.map(error) }
        }
        let r = try await once()
        guard r.status == 401, credentials != nil else { return r }
        try await login(force: true)
        return try await once()
    }

    /// Like `request`, but an answer outside 2xx throws (`httpStatus`, transient for 5xx/408/429).
    func expect(_ method: String, _ sub: String, json: JSONValue? = nil, timeout: Double? = nil) async throws(ReplicationError) -> JSONValue {
        let a = try await request(method, sub, json: json, timeout: timeout)
        guard (200..<300).contains(a.status) else { throw Self.failure(a, "\(method) \(sub.isEmpty ? url : sub)") }
        return a.json
    }

    /// A streamed `GET db/<sub>` (the continuous `_changes` feed).
    /// A streamed request to `db/<sub>` (the continuous `_changes` feed); an answer outside
    /// 2xx throws, as `expect` does.
    func stream(_ method: String, _ sub: String, json: JSONValue?, timeout: Double) async throws(ReplicationError) -> HTTPClientStream {
        try await login(force: false)
        var headers = authHeaders() + [("Accept", "application/json")]
        if json != nil { headers.append(("Content-Type", "application/json")) }
        var request = HTTPClientRequest(method: method, endpoint: endpoint, target: path + "/" + sub, headers: headers,
                                        body: json.map { CanonicalJSON.encode($0) }, timeout: timeout)
        request.headers += extraHeaders
        let stream: HTTPClientStream
        do { stream = try await retrying { () async throws(HTTPClientError) in try await client.stream(request) } } catch { throw Self.map(error) }
        guard (200..<300).contains(stream.head.status) else {
            throw .httpStatus(stream.head.status, "\(method) \(sub.prefix { $0 != "?" })")
        }
        return stream
    }

    /// The error for a non-2xx answer.
    static func failure(_ a: Answer, _ what: String) -> ReplicationError {
        .httpStatus(a.status, "\(what): \(a.reason)")
    }

    /// Logs in with `POST /_session` (CouchDB's replicator default, `couch_replicator_auth_session`)
    /// unless a cookie is held and `force` is false. A server without `_session` (404/405) gets
    /// Basic credentials from then on.
    func login(force: Bool) async throws(ReplicationError) {
        guard let credentials, !basicOnly.withLock({ $0 }) else { return }
        if !force, cookie.withLock({ $0 }) != nil { return }
        let form = "name=" + Self.encode(credentials.user) + "&password=" + Self.encode(credentials.password)
        var r = HTTPClientRequest(method: "POST", endpoint: endpoint, target: "/_session",
                                  headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
                                  body: Array(form.utf8))
        r.headers += extraHeaders
        let response: HTTPClientResponse
        do { response = try await execute(r) } catch { throw Self.map(error) }
        switch response.status {
        case 200..<300:
            let value = response.head.values(of: "Set-Cookie").compactMap(Self.authSession).first
            cookie.withLock { $0 = value }
            if value == nil { basicOnly.withLock { $0 = true } }
        case 404, 405, 501:
            basicOnly.withLock { $0 = true }
        default:
            let json = (try? JSONParser.parse(response.body, sizeLimit: 1 << 20)) ?? .null
            throw Self.failure(Answer(status: response.status, json: json, headers: response.head), "POST /_session")
        }
    }

    private func send(_ method: String, _ target: String, json: JSONValue?, body: [UInt8]?, contentType: String?,
                      timeout: Double?) async throws(ReplicationError) -> Answer {
        try await login(force: false)
        var headers = authHeaders()
        headers.append(("Accept", "application/json"))
        var bytes = body
        if let json {
            bytes = CanonicalJSON.encode(json)
            headers.append(("Content-Type", "application/json"))
        } else if let contentType {
            headers.append(("Content-Type", contentType))
        }
        headers += extraHeaders
        let request = HTTPClientRequest(method: method, endpoint: endpoint, target: target, headers: headers, body: bytes, timeout: timeout)
        let response: HTTPClientResponse
        do { response = try await execute(request) } catch { throw Self.map(error) }
        let parsed = response.body.isEmpty ? JSONValue.null : ((try? JSONParser.parse(response.body)) ?? .null)
        return Answer(status: response.status, json: parsed, headers: response.head)
    }

    /// How often a request whose connection closed before any answer is sent again, as
    /// CouchDB's replicator does (`retries_per_request`, 5 by default).
    static let retriesPerRequest = 5

    /// `client.execute(request)`, sent again when the connection closed before any answer.
    private func execute(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        try await retrying { () async throws(HTTPClientError) in try await client.execute(request) }
    }

    /// Runs `send` again, up to `retriesPerRequest` times waiting 0.25 s and doubling, when the
    /// server closed the connection before answering: a server's idle timeout racing a client
    /// that was slow to write, or a restart. Every request the replicator sends is safe to
    /// repeat (reads, `_revs_diff`, `_bulk_get`, `_bulk_docs` and PUTs with `new_edits=false`,
    /// `_session`); a checkpoint PUT repeated after a lost answer is a 409, which
    /// `CouchCheckpoint` settles. Other failures go to the replicator's own retry.
    private func retrying<T>(_ send: () async throws(HTTPClientError) -> T) async throws(HTTPClientError) -> T {
        var wait = 0.25
        for _ in 0..<Self.retriesPerRequest {
            do { return try await send() } catch {
                guard error == .closedBeforeResponse else { throw error }
            }
            do { try await Task.sleep(for: .seconds(wait)) } catch { throw .cancelled }
            wait *= 2
        }
        return try await send()
    }

    private func authHeaders() -> [(name: String, value: String)] {
        if let c = cookie.withLock({ $0 }) { return [("Cookie", "AuthSession=" + c)] }
        guard let credentials else { return [] }
        return [("Authorization", "Basic " + Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString())]
    }

    /// The `AuthSession` value of a `Set-Cookie` field.
    private static func authSession(_ setCookie: String) -> String? {
        guard let first = setCookie.split(separator: ";").first else { return nil }
        let parts = first.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, parts[0].trimmingASCIIWhitespace() == "AuthSession" else { return nil }
        let value = String(parts[1])
        return value.isEmpty ? nil : value
    }

    /// A transport failure as a replication error (TLS refusals are permanent; the rest is
    /// the network, retried).
    static func map(_ error: HTTPClientError) -> ReplicationError {
        switch error {
        case .transport(.tls(let e)): return .tls(e)
        case .invalidURL(let u): return .invalidURL(u)
        case .cancelled: return .stopped
        case .malformedResponse(let e): return .protocolError("malformed HTTP response: \(e.reason)")
        case .badContentEncoding(let why): return .protocolError(why)
        case .transport, .timedOut, .closedBeforeResponse: return .connection(error.description)
        }
    }

    /// `s` percent-encoded for a path segment or a query value.
    static func encode(_ s: String) -> String {
        return PercentEncoding.encode(s)
    }

    /// A document ID as CouchDB's paths take it: a design document keeps its `_design/` slash.
    static func encodeDocumentID(_ id: String) -> String {
        if id.hasPrefix("_design/") { return "_design/" + encode(String(id.dropFirst(8))) }
        if id.hasPrefix("_local/") { return "_local/" + encode(String(id.dropFirst(7))) }
        return encode(id)
    }
}
