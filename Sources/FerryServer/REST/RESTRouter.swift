import FerryStore
import FerrySync
import FoundationEssentials
import Logging
import Synchronization

/// Answers the REST API (Protocol/rest.md): finds the route for a request's method and path,
/// checks who sent it and what their role allows, and runs the route. Every failure is answered
/// in CouchDB's shape (`RESTError`). Routes run off the event loop; the store calls they make
/// are synchronous and short, except bulk writes and feeds, which the store orders itself.
public final class RESTRouter: Sendable {
    /// The databases served.
    public let registry: DatabaseRegistry
    /// Users, roles and anonymous policy.
    public let access: AccessControl
    /// This server's stable identity (`GET /`'s `uuid`).
    public let serverID: String
    /// The version `GET /` reports.
    public let version: String
    /// Routes a plugin adds in front of the built-in ones (operations: `/_up`, `/_metrics`);
    /// a hook returns nil to let the request through.
    public let hooks: [@Sendable (RESTRequest, RESTRouter) async -> RESTResponse?]
    /// Cross-origin requests allowed (nil: none, CouchDB's default).
    public let cors: CORSPolicy?
    let logger: Logger
    /// Named filters for `_changes?filter=NAME` (the same ones BLIP clients select).
    let pullFilters = Mutex<[String: PullFilter]>([:])

    /// Registers a named filter for `_changes?filter=NAME`; the query's other parameters are
    /// its parameters.
    public func registerPullFilter(_ name: String, _ filter: @escaping PullFilter) {
        pullFilters.withLock { $0[name] = filter }
    }

    /// A router over `registry` guarded by `access`.
    public init(registry: DatabaseRegistry, access: AccessControl, serverID: String, version: String,
                hooks: [@Sendable (RESTRequest, RESTRouter) async -> RESTResponse?] = [],
                cors: CORSPolicy? = nil, logger: Logger = Logger(label: "ferry.rest")) {
        self.registry = registry
        self.access = access
        self.serverID = serverID
        self.version = version
        self.hooks = hooks
        self.cors = cors
        self.logger = logger
    }

    /// What a route works with: the request, who sent it, and the database it names.
    struct Context: Sendable {
        let request: RESTRequest
        let identity: AccessControl.Identity
        let name: String
        let db: Database
        let role: Role
    }

    /// The answer to `request`.
    public func respond(_ request: RESTRequest) async -> RESTResponse {
        // A preflight is answered before authentication: browsers send it without credentials.
        if let preflight = cors?.preflight(request) { return preflight }
        var response: RESTResponse
        if let refusal = crossOriginWriteRefusal(request) { response = refusal } else { response = await answer(request) }
        response.user = request.provenUser.name.withLock { $0 }
        // One pass over the answer's fields for what is added below. (Routes write these names
        // in this case: an exact comparison keeps the per-request cost down — a generic
        // case-insensitive one showed as 7 % of a GET's CPU.)
        var location: Int?
        var multipart = false, cacheControl = false, setsCookie = false
        for (i, field) in response.headers.enumerated() {
            switch field.name {
            case "Location": location = i
            case "Content-Type": multipart = multipart || field.value.hasPrefix("multipart/")
            case "Cache-Control": cacheControl = true
            case "Set-Cookie": setsCookie = true
            default: break
            }
        }
        // An absolute `Location`, as CouchDB writes it (scheme and the `Host` the client used).
        if let i = location, response.headers[i].value.hasPrefix("/"), let host = request.header("Host") {
            response.headers[i].value = "\(request.isSecure ? "https" : "http")://\(host)" + response.headers[i].value
        }
        // CouchDB marks every answer so (caches must ask again before reusing one) — but a
        // redirect, a 304 and a multipart answer, which it sends without.
        if response.status != 301, response.status != 304, !multipart, !cacheControl {
            response.headers.append(("Cache-Control", "must-revalidate"))
        }
        if let cors { response.headers += cors.fields(for: request) }
        // A session cookie past a tenth of its life is renewed on whatever the answer is, as
        // CouchDB does (unless the answer sets the cookie itself: a login or logout).
        if !setsCookie, let renewed = access.renewal(cookie: request.header("Cookie"), secure: request.isSecure) {
            response.headers.append(("Set-Cookie", renewed))
        }
        return response
    }

    private func answer(_ request: RESTRequest) async -> RESTResponse {
        for hook in hooks {
            if let r = await hook(request, self) { return r }
        }
        do {
            return try await route(request)
        } catch {
            // 501 is an answer (a feature Ferry does not have) and 503 load shedding (the
            // password pool is full), not faults: a flood of them must not flood the log too.
            if error.status >= 500, error.status != 501, error.status != 503 {
                logger.warning("request failed", metadata: ["path": "\(request.head.target)", "error": "\(error.reason)"])
            }
            return error.response
        }
    }

    /// Who sent `request`; 401 for missing (when anonymous access is off) or wrong credentials,
    /// 400 for a malformed session cookie, 503 when password checks are queued full.
    public func identify(_ request: RESTRequest) async throws(RESTError) -> AccessControl.Identity {
        try await authentication(request).identity
    }

    /// Who sent `request` and how they proved it.
    func authentication(_ request: RESTRequest) async throws(RESTError) -> AccessControl.Authentication {
        let a = try await access.authenticate(authorization: request.header("Authorization"), cookie: request.header("Cookie"),
                                              certificate: request.peerCertificate, address: request.remoteAddress?.host).get()
        if case .user(let name) = a.identity { request.provenUser.name.withLock { $0 = name } }
        return a
    }



    private func route(_ r: RESTRequest) async throws(RESTError) -> RESTResponse {
        let s = r.segments
        guard let first = s.first else {
            try Self.allow(r, ["GET", "HEAD"])
            // Public, but credentials that are sent must be right (CouchDB checks them too).
            if r.header("Authorization") != nil { _ = try await identify(r) }
            return serverInfo()
        }
        if first == "_uuids" {
            // Public, as CouchDB's: fresh IDs tell nothing.
            try Self.allow(r, ["GET", "HEAD"])
            return try uuids(r)
        }
        if first == "_session", s.count == 1 {
            // Before authentication: logging in is how a client without it gets some.
            return try await session(r)
        }
        if first == "_users" { return try await users(r) }
        if first.hasPrefix("_") {
            let identity = try await identify(r)
            switch first {
            case "_all_dbs":
                try Self.allow(r, ["GET", "HEAD"])
                return allDatabases(identity)
            case "_dbs_info" where s.count == 1:
                return try databasesInfo(r, identity)
            default:
                // CouchDB reads `PUT /_name` as creating a database by an illegal name.
                if s.count == 1, r.method == "PUT" { throw RESTError.illegalDatabaseName(first) }
                throw .notFound("no route \(r.head.target)")
            }
        }
        let identity = try await identify(r)
        let name = first
        if s.count == 1 {
            switch r.method {
            case "PUT": return try createDatabase(r, name, identity)
            case "DELETE":
                // A `?rev=` says a document was meant (CouchDB refuses it so, for the same reason).
                if r[query: "rev"] != nil {
                    throw .badRequest("You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
                }
                try require(.admin, identity, name)
                try registry.delete(name)
                return .ok()
            default: break
            }
        }
        guard let db = registry.database(name) else { throw .notFound("Database does not exist.") }
        guard let role = access.role(of: identity, on: name) else {
            throw .forbidden("You are not allowed to access this db.")
        }
        let c = Context(request: r, identity: identity, name: name, db: db, role: role)
        if s.count == 1 {
            switch r.method {
            case "GET", "HEAD": return try databaseInfo(c)
            case "POST": return try await postDocument(c)
            default: throw .methodNotAllowed("DELETE,GET,HEAD,POST,PUT")
            }
        }
        let second = s[1]
        if second == "_design" || Document.isDesignID(second) { return try await designDocumentRoute(c, s[1...]) }
        // (`_changes` ignores what follows it, as CouchDB's does.)
        if second.hasPrefix("_"), s.count > 2, !["_local", "_all_docs", "_design_docs", "_index", "_find", "_explain", "_changes", "_compact"].contains(second) {
            // CouchDB reads `/db/_name/x` as attachment `x` of document `_name`: none is there.
            switch r.method {
            case "GET", "HEAD", "DELETE": throw .notFound("missing")
            case "PUT": throw .illegalDocumentID(second)
            default: throw .methodNotAllowed("DELETE,GET,HEAD,PUT")
            }
        }
        if second.hasPrefix("_") {
            switch second {
            case "_all_docs" where s.count == 2: return try allDocs(c)
            case "_design_docs" where s.count == 2: return try designDocs(c)
            case "_all_docs", "_design_docs":
                // Only `/queries` is under them (CouchDB's multi-query form).
                guard s.count == 3, s[2] == "queries" else { throw .notFound("missing") }
                guard r.method == "POST" else { throw .methodNotAllowed("POST") }
                return try multiQuery(c, designOnly: second == "_design_docs")
            case "_bulk_docs": return try await bulkDocs(c)
            case "_changes": return try await changes(c)
            case "_security" where s.count == 2: return try security(c)
            case "_missing_revs" where s.count == 2: return try missingRevs(c)
            case "_local_docs" where s.count == 2: return try localDocs(c)
            case "_local":
                guard s.count == 3 else {
                    if s.count == 2, r.method == "PUT" { throw .badRequest("Invalid _local document id.") }
                    throw .notFound("missing")
                }
                return try await localDocument(c, s[2])
            default:
                if let r = try await extendedDatabaseRoute(c, second) { return r }
                // A write to `/db/_name` is a document ID CouchDB reserves, and answered so.
                if s.count == 2, r.method == "PUT" { throw .illegalDocumentID(second) }
                throw .notFound("no route \(r.head.target)")
            }
        }
        if s.count == 2 { return try await document(c, second) }
        return try await attachment(c, second, s[2...].joined(separator: "/"))
    }

    /// Throws 403 unless the identity has `needed` on the context's database.
    func require(_ needed: Role, _ c: Context) throws(RESTError) {
        guard c.role >= needed else { throw Self.forbiddenFor(needed) }
    }

    func require(_ needed: Role, _ identity: AccessControl.Identity, _ db: String) throws(RESTError) {
        guard let role = access.role(of: identity, on: db), role >= needed else { throw Self.forbiddenFor(needed) }
    }

    static func forbiddenFor(_ needed: Role) -> RESTError {
        switch needed {
        case .reader: return .forbidden("You are not allowed to access this db.")
        case .writer: return .forbidden("You are not allowed to write to this db.")
        case .admin: return .forbidden("You are not a db or server admin.")
        }
    }

    /// Throws 405 unless the method is one of `methods`.
    static func allow(_ r: RESTRequest, _ methods: [String]) throws(RESTError) {
        guard methods.contains(r.method) else { throw .methodNotAllowed(methods.joined(separator: ",")) }
    }

    /// Reads the body as a JSON object; 400 for bad JSON. With `strict` (CouchDB's `POST`
    /// routes) a declared type other than JSON is 415; a document `PUT` takes any, as
    /// CouchDB's does (curl's `-d` says form data).
    static func jsonObject(_ r: RESTRequest, strict: Bool = true) throws(RESTError) -> [String: JSONValue] {
        if strict, let type = r.header("Content-Type"), !type.lowercased().hasPrefix("application/json") {
            throw .badContentType("Content-Type must be application/json")
        }
        let body = try r.decodedBody()
        do { return try JSONParser.parseObject(body, sizeLimit: body.count + 1) } catch {
            throw .badRequest("Request body must be a JSON object: \(error)")
        }
    }
}
