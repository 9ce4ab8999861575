import FerryStore

/// `/{db}/_local/{id}` (Protocol/rest.md, "Local documents"): documents that are never
/// replicated and have no history — replication checkpoints, per-device settings. Any member
/// of the database may write them, a reader too (as CouchDB lets any member, and as BLIP lets
/// a reader keep its checkpoint): a pulling replicator must record how far it got.
extension RESTRouter {
    /// `GET /{db}/_local_docs`: the local documents as `_all_docs` rows (`include_docs`,
    /// `descending`, `limit`, `skip`), `total_rows` and `offset` null, as CouchDB answers.
    func localDocs(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "POST"])
        let include = c.request[query: "include_docs"] == "true"
        var docs: [LocalDocument]
        do { docs = try c.db.localDocuments(withPrefix: "") } catch { throw RESTError(error) }
        docs.sort { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        if c.request[query: "descending"] == "true" { docs.reverse() }
        let skip = Int(c.request[query: "skip"] ?? "") ?? 0
        let limit = Int(c.request[query: "limit"] ?? "") ?? Int.max
        let rows: [JSONValue] = docs.dropFirst(max(0, skip)).prefix(max(0, limit)).map { d in
            let id = "_local/" + d.id
            var row: [String: JSONValue] = ["id": .string(id), "key": .string(id), "value": .object(["rev": .string(d.revision)])]
            if include {
                var body = d.properties
                body["_id"] = .string(id)
                body["_rev"] = .string(d.revision)
                row["doc"] = .object(body)
            }
            return .object(row)
        }
        return .json(200, .object(["total_rows": .null, "offset": .null, "rows": .array(rows)]))
    }

    func localDocument(_ c: Context, _ id: String) async throws(RESTError) -> RESTResponse {
        do {
            switch c.request.method {
            case "GET", "HEAD":
                guard let d = try c.db.localDocument(id) else { throw RESTError.notFound("missing") }
                var o = d.properties
                o["_id"] = .string("_local/" + id)
                o["_rev"] = .string(d.revision)
                if c.request[query: "revs"] == "true" {
                    // A local document has no history: its one revision, as CouchDB shows it.
                    o["_revisions"] = .object(["start": 0, "ids": .array([.string(String(d.revision.drop { $0 != "-" }.dropFirst()))])])
                }
                return Self.withETag(.json(200, .object(o)))
            case "PUT":
                try require(.reader, c)
                let incoming = DocumentJSON.incoming(try Self.jsonObject(c.request, strict: false))
                let expected = try Self.namedRevision(c.request, body: incoming.rev)
                let rev = try await c.db.write { (d) throws(StoreError) in try d.putLocalDocument(id, properties: incoming.properties, expectedRevision: expected) }
                var created = Self.withETag(.json(201, .object(["ok": true, "id": .string("_local/" + id), "rev": .string(rev)])))
                created.headers.append(("Location", Self.documentLocation(db: c.name, id: "_local/" + id)))
                return created
            case "COPY":
                // To another local document, or to a document (which then has a history).
                try require(.reader, c)
                guard let d = try c.db.localDocument(id) else { throw RESTError.notFound("missing") }
                guard let destination = c.request.header("Destination"), !destination.isEmpty else {
                    throw RESTError.badRequest("Destination header is mandatory for COPY.")
                }
                guard destination.hasPrefix("_local/") else {
                    try require(.writer, c)
                    let copy = Document(id: destination, properties: d.properties)
                    let saved = try await c.db.write { (d) throws(StoreError) in try d.save(copy) }
                    let rev = saved.revisionID?.description ?? ""
                    return Self.withETag(.json(201, .object(["ok": true, "id": .string(destination), "rev": .string(rev)])))
                }
                let localID = String(destination.dropFirst(7)), properties = d.properties
                let rev = try await c.db.write { (d) throws(StoreError) in try d.putLocalDocument(localID, properties: properties) }
                var copied = RESTResponse.json(201, .object(["ok": true, "id": .string(destination), "rev": .string(rev)]))
                copied.headers += [("ETag", "\"\(rev)\""), ("Location", Self.documentLocation(db: c.name, id: destination))]
                return copied
            case "DELETE":
                try require(.reader, c)
                guard try c.db.localDocument(id) != nil else { throw RESTError.notFound("missing") }
                try await c.db.write { (d) throws(StoreError) in try d.deleteLocalDocument(id) }
                return Self.withETag(.json(200, .object(["ok": true, "id": .string("_local/" + id), "rev": "0-0"])))
            default:
                throw RESTError.methodNotAllowed("COPY,DELETE,GET,HEAD,PUT")
            }
        } catch {
            throw RESTError.from(error)
        }
    }
}
