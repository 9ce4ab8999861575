import FerryHTTP
import FerryStore
import FoundationEssentials

/// `/_users`: CouchDB's users database, mapped onto the users file (Protocol/rest.md,
/// "Users"). A document `org.couchdb.user:NAME` is the user NAME: its `roles` are the user's
/// CouchDB roles (`UserRecord.groups`, what `_security` objects grant to); a `password`
/// written in it is hashed on the password pool and only the hash is stored or shown
/// (`password_scheme`, `iterations`, `salt`, `derived_key`, as CouchDB shows its own).
/// Server admins only, as CouchDB 3 has it; Ferry's per-database roles of the users file stay
/// as they are.
extension RESTRouter {
    static let userPrefix = "org.couchdb.user:"

    func users(_ r: RESTRequest) async throws(RESTError) -> RESTResponse {
        let identity = try await identify(r)
        guard access.isServerAdmin(identity) else {
            if identity == .anonymous { throw RESTError(401, "unauthorized", "You are not authorized to access this db.") }
            throw .forbidden("You are not allowed to access this db.")
        }
        let s = r.segments
        if s.count == 1 {
            switch r.method {
            case "GET", "HEAD":
                let users = access.users
                return .json(200, .object([
                    "db_name": "_users", "doc_count": .int(Int64(users.count)), "doc_del_count": 0,
                    "update_seq": .string(String(users.values.reduce(0) { $0 + $1.generation })),
                    "instance_start_time": "0", "purge_seq": "0", "compact_running": false, "props": .object([:]),
                    "sizes": .object(["file": 0, "active": 0, "external": 0]),
                ]))
            case "PUT": throw RESTError(412, "file_exists", "The database could not be created, the file already exists.")
            default: throw .methodNotAllowed("GET,HEAD,PUT")
            }
        }
        if s.count == 2, s[1] == "_all_docs" {
            try Self.allow(r, ["GET", "HEAD"])
            let rows: [JSONValue] = access.users.values.sorted { $0.name < $1.name }.map { u in
                let id = Self.userPrefix + u.name
                return .object(["id": .string(id), "key": .string(id), "value": .object(["rev": .string(Self.revision(u))])])
            }
            return .json(200, .object(["total_rows": .int(Int64(rows.count)), "offset": 0, "rows": .array(rows)]))
        }
        guard s.count == 2 else { throw .notFound("missing") }
        let id = s[1]
        switch r.method {
        case "GET", "HEAD":
            guard id.hasPrefix(Self.userPrefix), let user = access.users[String(id.dropFirst(Self.userPrefix.count))] else {
                throw .notFound("missing")
            }
            return .json(200, Self.userDocument(user), headers: [("ETag", "\"\(Self.revision(user))\"")])
        case "PUT": return try await putUser(r, id)
        case "DELETE": return try deleteUser(r, id)
        default: throw .methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    private func putUser(_ r: RESTRequest, _ id: String) async throws(RESTError) -> RESTResponse {
        let o = try Self.jsonObject(r, strict: false)
        guard id.hasPrefix(Self.userPrefix) else { throw .forbidden("Doc ID must be of the form org.couchdb.user:name") }
        let name = String(id.dropFirst(Self.userPrefix.count))
        guard o["name"]?.stringValue == name else {
            if o["name"] != nil && o["name"]?.stringValue == nil { throw .forbidden("doc.name must be a string") }
            throw .forbidden("Doc ID must be of the form org.couchdb.user:name")
        }
        if let bodyID = o["_id"], bodyID.stringValue != id { throw .badRequest("Document id must match the URL") }
        guard o["type"]?.stringValue == "user" else { throw .forbidden("doc.type must be user") }
        guard let list = o["roles"]?.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
            throw .forbidden("doc.roles must be an array")
        }
        let groups = list.compactMap(\.stringValue)
        if groups.contains(where: { $0.hasPrefix("_") }) { throw .forbidden("No system roles (starting with underscore) in users db.") }
        guard UserRecord.isValidName(name) else { throw .forbidden("Name \(name) is not valid: letters, digits and . _ @ - only") }
        let current = access.users[name]
        let rev = o["_rev"]?.stringValue ?? r[query: "rev"]
        guard rev == current.map(Self.revision) else { throw .conflict }
        var password: PasswordHash?
        if let clear = o["password"] {
            guard let text = clear.stringValue else { throw .forbidden("doc.password must be a string") }
            password = try await access.hashPassword(text)
        } else if let hash = current?.password, o["derived_key"]?.stringValue == Hex.encode(hash.hash),
                  o["salt"]?.stringValue == Hex.encode(hash.salt) {
            password = hash
        }
        var saved: UserRecord?
        do {
            try access.updateUsers { (users) throws(UserStore.Failure) in
                // Another writer may have got in while the password was hashed.
                guard users[name].map(Self.revision) == current.map(Self.revision) else { return }
                var u = users[name] ?? UserRecord(name: name, password: nil, generation: 0)
                u.password = password
                u.groups = groups
                u.generation += 1
                users[name] = u
                saved = u
            }
        } catch { throw RESTError(500, "error", error.description) }
        guard let saved else { throw .conflict }
        return .json(201, .object(["ok": true, "id": .string(id), "rev": .string(Self.revision(saved))]),
                     headers: [("ETag", "\"\(Self.revision(saved))\""), ("Location", "/_users/" + Self.encodePathSegment(id))])
    }

    private func deleteUser(_ r: RESTRequest, _ id: String) throws(RESTError) -> RESTResponse {
        guard id.hasPrefix(Self.userPrefix), let user = access.users[String(id.dropFirst(Self.userPrefix.count))] else {
            throw .notFound("missing")
        }
        guard r[query: "rev"] == Self.revision(user) else { throw .conflict }
        do {
            try access.updateUsers { (users) throws(UserStore.Failure) in users[user.name] = nil }
        } catch { throw RESTError(500, "error", error.description) }
        let gone = "\(user.generation + 1)-" + String(AccessControl.sha256Hex(Array("deleted:\(user.name)".utf8)).prefix(32))
        return .json(200, .object(["ok": true, "id": .string(id), "rev": .string(gone)]), headers: [("ETag", "\"\(gone)\"")])
    }

    /// The user's document revision: its write count and a digest of what it holds.
    static func revision(_ u: UserRecord) -> String {
        let content = CanonicalJSON.encode(.object(["groups": .array(u.groups.map { .string($0) }),
                                                    "password": u.password.map { .string($0.encoded) } ?? .null]))
        return "\(u.generation)-" + String(AccessControl.sha256Hex(content).prefix(32))
    }

    /// The `_users` document of `u`, its password only as the hash.
    static func userDocument(_ u: UserRecord) -> JSONValue {
        var o: [String: JSONValue] = [
            "_id": .string(userPrefix + u.name), "_rev": .string(revision(u)), "name": .string(u.name), "type": "user",
            "roles": .array(u.groups.map { .string($0) }),
        ]
        if let p = u.password {
            o["password_scheme"] = "pbkdf2"
            o["pbkdf2_prf"] = "sha256"
            o["iterations"] = .int(Int64(p.iterations))
            o["salt"] = .string(Hex.encode(p.salt))
            o["derived_key"] = .string(Hex.encode(p.hash))
        }
        return .object(o)
    }

    static func encodePathSegment(_ s: String) -> String {
        return PercentEncoding.encode(s, keeping: ":@")
    }
}
