import FerryStore

/// `/{db}/_local/{id}` (Protocol/rest.md, "Local documents"): documents that are never
/// replicated and have no history — replication checkpoints, per-device settings. Any member
/// of the database may write them, a reader too (as CouchDB lets any member, and as BLIP lets
/// a reader keep its checkpoint): a pulling replicator must record how far it got.
extension RESTRouter {
    func localDocument(_ c: Context, _ id: String) throws(RESTError) -> RESTResponse {
        do {
            switch c.request.method {
            case "GET", "HEAD":
                guard let d = try c.db.localDocument(id) else { throw RESTError.notFound("missing") }
                var o = d.properties
                o["_id"] = .string("_local/" + id)
                o["_rev"] = .string(d.revision)
                return .json(200, .object(o))
            case "PUT":
                try require(.reader, c)
                let incoming = DocumentJSON.incoming(try Self.jsonObject(c.request, strict: false))
                let expected = try Self.namedRevision(c.request, body: incoming.rev)
                let rev = try c.db.putLocalDocument(id, properties: incoming.properties, expectedRevision: expected)
                return .json(201, .object(["ok": true, "id": .string("_local/" + id), "rev": .string(rev)]))
            case "DELETE":
                try require(.reader, c)
                guard try c.db.localDocument(id) != nil else { throw RESTError.notFound("missing") }
                try c.db.deleteLocalDocument(id)
                return .json(200, .object(["ok": true, "id": .string("_local/" + id), "rev": "0-0"]))
            default:
                throw RESTError.methodNotAllowed("DELETE,GET,HEAD,PUT")
            }
        } catch {
            throw RESTError.from(error)
        }
    }
}
