import FerryStore

/// `/{db}/{docid}` and `POST /{db}` (Protocol/rest.md, "Documents"): read with `rev`, `revs`,
/// `revs_info`, `conflicts`, `open_revs` and ETags; write with `_rev`, `?rev=` or `If-Match`
/// (a stale one is 409), `new_edits=false` for replicated revisions; delete with a revision;
/// `COPY` to the `Destination` header's ID (CopyRoute). Design documents (`_design/NAME`) are
/// served here too; writing one needs the admin role (`requireWriteAccess`).
extension RESTRouter {
    func document(_ c: Context, _ id: String) throws(RESTError) -> RESTResponse {
        switch c.request.method {
        case "GET", "HEAD": return try readDocument(c, id)
        case "PUT":
            try requireWriteAccess(c, to: id)
            return try writeDocument(c, id: id, body: try documentBody(c, id: id))  // JSON or multipart/related
        case "DELETE":
            try requireWriteAccess(c, to: id)
            return try deleteDocument(c, id)
        case "COPY": return try copyDocument(c, id)
        default: throw .methodNotAllowed("DELETE,GET,HEAD,POST,PUT,COPY")
        }
    }

    func postDocument(_ c: Context) async throws(RESTError) -> RESTResponse {
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        let id = body["_id"]?.stringValue ?? Self.newID()
        try requireWriteAccess(c, to: id)
        return try writeDocument(c, id: id, body: body)
    }

    /// Throws 403 unless the context's role may write document `id`: the writer role, and for a
    /// design document the admin role, as CouchDB asks of its database admins (a design
    /// document's functions run for every reader there, so members may not change them).
    func requireWriteAccess(_ c: Context, to id: String) throws(RESTError) {
        try require(Document.isDesignID(id) ? .admin : .writer, c)
    }

    private func readDocument(_ c: Context, _ id: String) throws(RESTError) -> RESTResponse {
        let r = c.request
        let flag = { (name: String) in r[query: name] == "true" }
        if let openRevs = r[query: "open_revs"] { return try openRevisions(c, id, openRevs) }
        let attsSince = try AttachmentRendering.attsSince(r)
        // CouchDB: `atts_since` implies `attachments=true`.
        let withBytes = flag("attachments") || attsSince != nil
        do {
            if r[query: "rev"] == nil, !flag("revs"), !flag("revs_info"), !flag("conflicts"), !withBytes {
                // The common read: the stored bytes with `_id` and `_rev` spliced in (a body
                // with attachments is rewritten, for their stubs).
                guard let (rev, deleted, body) = try c.db.documentJSON(id), !deleted else {
                    throw RESTError.notFound(try c.db.documentJSON(id) == nil ? "missing" : "deleted")
                }
                let etag = "\"\(rev)\""
                if r.header("If-None-Match") == etag { return RESTResponse(status: 304, headers: [("ETag", etag)]) }
                var bytes = DocumentJSON.splice(id: id, rev: rev, deleted: false, body: body)
                if MultipartRelated.find(Array(#""_attachments""#.utf8), in: body, from: 0) != nil,
                   case .object(let o)? = try? JSONParser.parse(bytes) {
                    bytes = CanonicalJSON.encode(.object(AttachmentRendering.stubbed(o)))
                }
                return .json(200, bytes, headers: [("ETag", etag)])
            }
            guard let tree = try c.db.revisionTree(of: id) else { throw RESTError.notFound("missing") }
            let doc: Document
            if let revText = r[query: "rev"] {
                guard let rev = try? RevisionID(revText), let d = try c.db.revision(rev, of: id) else { throw RESTError.notFound("missing") }
                doc = d
            } else {
                guard let d = try c.db.document(id), !d.isDeleted else { throw RESTError.notFound("deleted") }
                doc = d
            }
            let etag = "\"\(doc.revisionID?.description ?? "")\""
            if r.header("If-None-Match") == etag { return RESTResponse(status: 304, headers: [("ETag", etag)]) }
            let multipart = withBytes && Self.accepts(r, "multipart/related")
            let since = AttachmentRendering.sinceGeneration(attsSince, rev: doc.revisionID, tree: tree)
            let (json, parts) = Self.documentObject(c.db, doc, tree: tree, revs: flag("revs"), revsInfo: flag("revs_info"),
                                                    conflicts: flag("conflicts"),
                                                    mode: withBytes ? (multipart ? .follows : .inline) : .stubs, since: since)
            guard multipart, !parts.isEmpty else { return .json(200, .object(json), headers: [("ETag", etag)]) }
            let (type, body) = MultipartWriter.related(json: CanonicalJSON.encode(.object(json)), parts: parts)
            return RESTResponse(status: 200, headers: [("Content-Type", type), ("ETag", etag)], body: .bytes(body))
        } catch {
            throw RESTError.from(error)
        }
    }

    /// A revision's JSON object with its attachments rendered for `mode` (CouchDB's stubs, or
    /// with the bytes of those changed after generation `since`), and the parts that follow.
    static func documentObject(_ db: Database, _ doc: Document, tree: RevisionTree?, revs: Bool, revsInfo: Bool = false,
                               conflicts: Bool = false, mode: AttachmentRendering.Mode, since: Int? = nil)
        -> (json: [String: JSONValue], parts: [AttachmentRendering.Part]) {
        var o = DocumentJSON.object(doc, tree: tree, revs: revs, revsInfo: revsInfo, conflicts: conflicts).objectValue ?? [:]
        guard mode != .stubs, let raw = doc.properties["_attachments"] else { return (o, []) }
        let (rendered, parts) = AttachmentRendering.render(db, ["_attachments": raw], mode: mode, sinceGeneration: since)
        o["_attachments"] = rendered["_attachments"]
        return (o, parts)
    }

    /// Whether the request's `Accept` names `type` (parameters and quality ignored).
    static func accepts(_ r: RESTRequest, _ type: String) -> Bool {
        guard let accept = r.header("Accept") else { return false }
        return accept.split(separator: ",").contains { MediaType.essence($0) == type }
    }

    /// The revision a write names: `?rev=`, `If-Match` or the body's `_rev`, which must agree.
    static func namedRevision(_ r: RESTRequest, body: String?) throws(RESTError) -> String? {
        var candidates: [String] = []
        if let q = r[query: "rev"] { candidates.append(q) }
        if let m = r.header("If-Match") { candidates.append(m.trimmingCharacters(in: ["\""])) }
        if let body { candidates.append(body) }
        guard let first = candidates.first else { return nil }
        guard candidates.allSatisfy({ $0 == first }) else {
            throw .badRequest("Document rev from request body and query string have different values")
        }
        return first
    }

    func writeDocument(_ c: Context, id: String, body: [String: JSONValue]) throws(RESTError) -> RESTResponse {
        // Inline and following attachment bytes become blobs before the save (AttachmentBodies).
        let incoming = DocumentJSON.incoming(try storingAttachmentData(c, id: id, body: body))
        let revText = try Self.namedRevision(c.request, body: incoming.rev)
        let result: (id: String, rev: String)
        if c.request[query: "new_edits"] == "false" {
            guard let revText else { throw .badRequest("new_edits=false needs the document's _rev") }
            result = try insertReplicated(c.db, id: id, rev: revText, incoming: incoming)
        } else {
            result = try save(c.db, id: id, rev: revText, incoming: incoming)
        }
        let status = c.request[query: "batch"] == "ok" ? 202 : 201
        return .json(status, .object(["ok": true, "id": .string(result.id), "rev": .string(result.rev)]),
                     headers: [("ETag", "\"\(result.rev)\""), ("Location", "/\(PercentDecoding.encodeSegment(c.name))/\(PercentDecoding.encodeSegment(id))")])
    }

    /// Saves a new revision whose parent is `rev` (nil: a new document), failing on conflict.
    func save(_ db: Database, id: String, rev revText: String?, incoming: DocumentJSON.Incoming) throws(RESTError) -> (id: String, rev: String) {
        do {
            let parent = try revText.map { (t) throws(StoreError) in try RevisionID(t) }
            let doc = Document(id: id, basedOn: parent, properties: incoming.properties)
            let saved = incoming.deleted ? try db.delete(doc, concurrencyControl: .failOnConflict)
                                         : try db.save(doc, concurrencyControl: .failOnConflict)
            return (id, saved.revisionID?.description ?? "")
        } catch { throw RESTError(error) }
    }

    /// Stores a revision made elsewhere with its history (`new_edits=false`), as replication does.
    func insertReplicated(_ db: Database, id: String, rev: String, incoming: DocumentJSON.Incoming) throws(RESTError) -> (id: String, rev: String) {
        let history = try DocumentJSON.replicatedHistory(rev: rev, revisions: incoming.revisions)
        let properties = DocumentJSON.replicatedProperties(incoming)
        let r = ReplicatedRevision(documentID: id, history: history, body: CanonicalJSON.encode(properties), isDeleted: incoming.deleted)
        do { _ = try db.insert(r) } catch { throw RESTError(error) }
        return (id, rev)
    }

    private func deleteDocument(_ c: Context, _ id: String) throws(RESTError) -> RESTResponse {
        guard let revText = try Self.namedRevision(c.request, body: nil) else { throw .conflict }
        var incoming = DocumentJSON.incoming([:])
        incoming.deleted = true
        let result = try save(c.db, id: id, rev: revText, incoming: incoming)
        return .json(200, .object(["ok": true, "id": .string(result.id), "rev": .string(result.rev)]),
                     headers: [("ETag", "\"\(result.rev)\"")])
    }
}
