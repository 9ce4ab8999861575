import FerryHTTP
import FerryStore
import FoundationEssentials

/// Server-wide routes (Protocol/rest.md, "Server"): `/`, `/_all_dbs`, `/_uuids`,
/// and creating, describing and deleting databases.
extension RESTRouter {
    func serverInfo() -> RESTResponse {
        .json(200, .object([
            "couchdb": "Welcome",
            "ferry": "Welcome",
            "version": .string(version),
            "uuid": .string(serverID),
            "vendor": .object(["name": "Ferry", "version": .string(version)]),
            "features": .array(["blipsync", "access-control"]),
        ]))
    }

    func allDatabases(_ identity: AccessControl.Identity) -> RESTResponse {
        let visible = registry.names.filter { access.role(of: identity, on: $0) != nil }
        return Self.withETag(.json(200, .array(visible.map { .string($0) })))
    }

    /// `GET /_uuids?count=N`: N from 0 to 1000 (CouchDB's `max_count`), else 400; never cached.
    func uuids(_ r: RESTRequest) throws(RESTError) -> RESTResponse {
        var count = 1
        if let text = r[query: "count"] {
            guard let n = Int(text), n >= 0 else { throw .badRequest("count must be a positive integer") }
            guard n <= 1000 else { throw .badRequest("count parameter too large") }
            count = n
        }
        var response = Self.withETag(.json(200, .object(["uuids": .array((0..<count).map { _ in .string(Self.newID()) })])))
        response.headers += [("Cache-Control", "no-cache"), ("Pragma", "no-cache")]
        return response
    }

    /// `response` with an `ETag` naming its body (CouchDB tags these answers so clients can
    /// revalidate them).
    static func withETag(_ response: RESTResponse) -> RESTResponse {
        guard case .bytes(let body) = response.body else { return response }
        var r = response
        r.headers.append(("ETag", opaqueETag(body)))
        return r
    }

    /// An opaque, quoted `ETag` naming `body` (a digest), as CouchDB's for computed answers.
    static func opaqueETag(_ body: [UInt8]) -> String {
        "\"" + String(AccessControl.sha256Hex(body).prefix(25)).uppercased() + "\""
    }

    /// A new document ID: 32 lowercase hex digits from CouchDB's sequential algorithm.
    static func newID() -> String { uuids.next() }

    /// The process's one sequence of server-made IDs, as CouchDB keeps one per node.
    static let uuids = SequentialUUIDs()

    /// `PUT /{db}`; `?conflict_policy=resolve|keep` picks the new database's `ConflictPolicy`
    /// (a Ferry extension; CouchDB ignores query parameters it does not know).
    func createDatabase(_ r: RESTRequest, _ name: String, _ identity: AccessControl.Identity) throws(RESTError) -> RESTResponse {
        guard access.isServerAdmin(identity) else { throw .forbidden("You are not a server admin.") }
        var policy: ConflictPolicy?
        if let text = r[query: "conflict_policy"] { policy = try Self.conflictPolicy(text, parameter: "conflict_policy") }
        _ = try registry.create(name, conflictPolicy: policy)
        return .json(201, Array(#"{"ok":true}"#.utf8), headers: [("Location", "/" + PercentEncoding.encode(name))])
    }

    /// A new database's `ConflictPolicy` named by `text` (the value of `parameter`); 400 otherwise.
    static func conflictPolicy(_ text: String, parameter: String) throws(RESTError) -> ConflictPolicy {
        guard let p = ConflictPolicy(rawValue: text) else {
            throw .badRequest("\(parameter) must be one of: " + ConflictPolicy.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return p
    }

    /// `POST /_dbs_info` with `{"keys":[…]}` (CouchDB 2.2+): `[{"key":NAME,"info":{…}}]`, or
    /// `"error":"not_found"` for a database that is not there or not the caller's; `GET` lists
    /// the caller's databases the same way, with `limit` and `skip`.
    func databasesInfo(_ r: RESTRequest, _ identity: AccessControl.Identity) throws(RESTError) -> RESTResponse {
        let names: [String]
        switch r.method {
        case "POST":
            let body = try Self.jsonObject(r)
            guard let keys = body["keys"]?.arrayValue else { throw .badRequest("`keys` member must exist.") }
            // A key that is not a string names no database: its row says so.
            names = keys.map { $0.stringValue ?? String(decoding: CanonicalJSON.encode($0), as: UTF8.self) }
        case "GET", "HEAD":
            let all = registry.names.filter { access.role(of: identity, on: $0) != nil }.sorted()
            func count(_ name: String) throws(RESTError) -> Int? {
                guard let text = r[query: name] else { return nil }
                guard let n = Int(text), n >= 0 else { throw RESTError(400, "query_parse_error", "Invalid value for integer: \"\(text)\"") }
                return n
            }
            let skip = try count("skip") ?? 0
            let limit = try count("limit") ?? Int.max
            names = Array(all.dropFirst(skip).prefix(limit))
        default: throw .methodNotAllowed("GET,HEAD,POST")
        }
        var rows: [JSONValue] = []
        for name in names {
            guard let db = registry.database(name), let role = access.role(of: identity, on: name) else {
                rows.append(.object(["key": .string(name), "error": "not_found"]))
                continue
            }
            let info = try databaseInfoJSON(Context(request: r, identity: identity, name: name, db: db, role: role))
            rows.append(.object(["key": .string(name), "info": info]))
        }
        let answer = RESTResponse.json(200, .array(rows))
        return r.method == "POST" ? answer : Self.withETag(answer)
    }

    func databaseInfo(_ c: Context) throws(RESTError) -> RESTResponse {
        .json(200, try databaseInfoJSON(c))
    }

    private func databaseInfoJSON(_ c: Context) throws(RESTError) -> JSONValue {
        do {
            let live = try c.db.documentCount()
            let all = try c.db.documentCount(includeDeleted: true)
            let size = c.db.fileBytes
            return .object([
                "db_name": .string(c.name),
                "doc_count": .int(Int64(live)),
                "doc_del_count": .int(Int64(all - live)),
                "update_seq": .string(String(c.db.lastSequence)),
                "purge_seq": .string(String(try c.db.purgeCount())),
                "conflicts": .int(Int64(try c.db.conflictedDocumentIDs().count)),
                "conflict_policy": .string(c.db.conflictPolicy.rawValue),
                "sizes": .object(["file": .int(size), "active": .int(size), "external": .int(size)]),
                "instance_start_time": "0",
                "compact_running": false,
                "props": .object([:]),
                "uuid": .string(c.db.uuid.uuidString.lowercased()),
            ])
        } catch { throw RESTError(error) }
    }
}
