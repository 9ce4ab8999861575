import FerryHTTP
import FerryStore

/// `/{db}/{docid}` and `POST /{db}` (Protocol/rest.md, "Documents"): read with `rev`, `revs`,
/// `revs_info`, `conflicts`, `open_revs` and ETags; write with `_rev`, `?rev=` or `If-Match`
/// (a stale one is 409), `new_edits=false` for replicated revisions; delete with a revision;
/// `COPY` to the `Destination` header's ID (CopyRoute). Design documents (`_design/NAME`) are
/// served here too; writing one needs the admin role (`requireWriteAccess`).
extension RESTRouter {
    func document(_ c: Context, _ id: String) async throws(RESTError) -> RESTResponse {
        switch c.request.method {
        case "GET", "HEAD": return try readDocument(c, id)
        case "PUT":
            try requireWriteAccess(c, to: id)
            return try await writeDocument(c, id: id, body: try documentBody(c, id: id))  // JSON or multipart/related
        case "DELETE":
            try requireWriteAccess(c, to: id)
            return try await deleteDocument(c, id)
        case "COPY": return try await copyDocument(c, id)
        case "POST": throw try Self.formUploadRefusal(c.request)
        default: throw .methodNotAllowed("DELETE,GET,HEAD,POST,PUT,COPY")
        }
    }

    func postDocument(_ c: Context) async throws(RESTError) -> RESTResponse {
        try require(.writer, c)
        // CouchDB wants the body declared JSON: without a Content-Type too it is 415.
        guard c.request.header("Content-Type") != nil else { throw .badContentType("Content-Type must be application/json") }
        let body = try Self.jsonObject(c.request)
        let id = body["_id"]?.stringValue ?? Self.newID()
        if id.hasPrefix("_local/") {
            // A local document, written as `PUT /{db}/_local/…` would (CouchDB takes it here too).
            var props = body
            for k in ["_id", "_rev"] { props[k] = nil }
            let rev: String
            let localID = String(id.dropFirst(7)), properties = props
            do { rev = try await c.db.write { (d) throws(StoreError) in try d.putLocalDocument(localID, properties: properties) } } catch { throw RESTError(error) }
            return .json(201, .object(["ok": true, "id": .string(id), "rev": .string(rev)]),
                         headers: [("Location", Self.documentLocation(db: c.name, id: id))])
        }
        try requireWriteAccess(c, to: id)
        return try await writeDocument(c, id: id, body: body)
    }

    /// Throws 403 unless the context's role may write document `id`: the writer role, and for a
    /// design document the admin role, as CouchDB asks of its database admins (a design
    /// document's functions run for every reader there, so members may not change them).
    func requireWriteAccess(_ c: Context, to id: String) throws(RESTError) {
        try require(Document.isDesignID(id) ? .admin : .writer, c)
    }

    /// CouchDB's answer to `POST /{db}/{docid}`, its HTML-form attachment upload, which Ferry
    /// does not take: CouchDB first wants a `Referer` (400) and `multipart/form-data` (415).
    static func formUploadRefusal(_ r: RESTRequest) throws(RESTError) -> RESTError {
        guard r.header("Referer") != nil else { return .badRequest("Referer header required.") }
        guard let type = r.header("Content-Type"), MediaType.essence(type[...]) == "multipart/form-data" else {
            return .badContentType("Content-Type must be multipart/form-data")
        }
        return .notImplemented("Ferry does not take attachments uploaded as HTML forms (POST /{db}/{docid}); PUT them")
    }

    /// What CouchDB's `N-xxx` revision syntax allows beyond Ferry's (lowercase hex digests of
    /// even length): such a revision cannot be here (404), while text that is no revision at
    /// all is CouchDB's 400 "Invalid rev format".
    static func parseRevision(_ text: String) throws(RESTError) -> RevisionID? {
        if let rev = try? RevisionID(text) { return rev }
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let g = Int(parts[0]), g >= 0, !parts[1].isEmpty else {
            throw .badRequest("Invalid rev format")
        }
        return nil
    }

    /// `"_attachments"` as it appears in a stored body that has some.
    static let attachmentsKey = Array(#""_attachments""#.utf8)

    /// `Location` of document `id` in database `db` (the router makes it absolute, as CouchDB's).
    static func documentLocation(db: String, id: String) -> String {
        "/\(PercentEncoding.encode(db))/\(PercentEncoding.encode(id))"
    }

    private func readDocument(_ c: Context, _ id: String) throws(RESTError) -> RESTResponse {
        let r = c.request
        let flag = { (name: String) in r[query: name] == "true" }
        if let openRevs = r[query: "open_revs"] { return try openRevisions(c, id, openRevs) }
        let attsSince = try AttachmentRendering.attsSince(r)
        // CouchDB: `atts_since` implies `attachments=true`; `meta` is `revs_info`, `conflicts`
        // and `deleted_conflicts` together.
        let withBytes = flag("attachments") || attsSince != nil
        let meta = flag("meta")
        let extras = DocumentJSON.Extras(revs: flag("revs"), revsInfo: meta || flag("revs_info"), conflicts: meta || flag("conflicts"),
                                         deletedConflicts: meta || flag("deleted_conflicts"), localSeq: flag("local_seq"))
        do {
            if r[query: "rev"] == nil, extras == DocumentJSON.Extras(), !withBytes {
                // The common read: the stored bytes with `_id` and `_rev` spliced in (a body
                // with attachments is rewritten, for their stubs).
                guard let (rev, deleted, body) = try c.db.documentJSON(id), !deleted else {
                    throw RESTError.notFound(try c.db.documentJSON(id) == nil ? "missing" : "deleted")
                }
                let etag = "\"\(rev)\""
                if r.header("If-None-Match") == etag { return RESTResponse(status: 304, headers: [("ETag", etag)]) }
                var bytes = DocumentJSON.splice(id: id, rev: rev, deleted: false, body: body)
                if MultipartRelated.find(Self.attachmentsKey, in: body, from: 0) != nil,
                   case .object(let o)? = try? JSONParser.parse(bytes) {
                    bytes = CanonicalJSON.encode(.object(AttachmentRendering.stubbed(o)))
                }
                return .json(200, bytes, headers: [("ETag", etag)])
            }
            // CouchDB checks the revision's syntax before it looks for the document.
            let asked = try r[query: "rev"].map { (t) throws(RESTError) in try Self.parseRevision(t) }
            guard let tree = try c.db.revisionTree(of: id) else { throw RESTError.notFound("missing") }
            var doc: Document
            var shown = extras
            if let asked {
                guard let rev = asked, tree.nodes[rev] != nil else { throw RESTError.notFound("missing") }
                doc = try Self.namedRevision(c.db, id: id, rev: rev, tree: tree, latest: flag("latest"))
                // CouchDB adds the metadata (`_revs_info`, `_conflicts`, …) to the current
                // revision only: one opened by `rev` comes as it is, with `_revisions` if asked.
                shown = DocumentJSON.Extras(revs: extras.revs)
            } else {
                guard let d = try c.db.document(id), !d.isDeleted else { throw RESTError.notFound("deleted") }
                doc = d
            }
            // CouchDB sends an ETag only for a body that is the revision alone: metadata
            // (`_revs_info`, `_conflicts`, `_deleted_conflicts`, `_local_seq`) drops it.
            let json0 = DocumentJSON.object(doc, tree: tree, shown)
            let hasMeta = ["_revs_info", "_conflicts", "_deleted_conflicts", "_local_seq"].contains { json0.objectValue?[$0] != nil }
            let etag = "\"\(doc.revisionID?.description ?? "")\""
            if !hasMeta, r.header("If-None-Match") == etag { return RESTResponse(status: 304, headers: [("ETag", etag)]) }
            let etagHeader: [(name: String, value: String)] = hasMeta ? [] : [("ETag", etag)]
            let multipart = withBytes && Self.accepts(r, "multipart/related")
            let since = AttachmentRendering.sinceGeneration(attsSince, rev: doc.revisionID, tree: tree)
            let (json, parts) = Self.documentObject(c.db, doc, tree: tree, extras: shown,
                                                    mode: withBytes ? (multipart ? .follows : .inline) : .stubs, since: since)
            guard multipart, !parts.isEmpty else { return .json(200, .object(json), headers: etagHeader) }
            let (type, body) = MultipartWriter.related(json: CanonicalJSON.encode(.object(json)), parts: parts)
            return RESTResponse(status: 200, headers: [("Content-Type", type)] + etagHeader, body: .bytes(body))
        } catch {
            throw RESTError.from(error)
        }
    }

    /// Revision `rev` of a document (in `tree`), or with `latest` the newest leaf descending
    /// from it, as CouchDB's `latest=true` answers. Only leaf bodies are kept (Protocol/rest.md,
    /// "Deliberate differences"): an inner revision is 404 `missing` otherwise.
    static func namedRevision(_ db: Database, id: String, rev: RevisionID, tree: RevisionTree, latest: Bool) throws -> Document {
        var wanted = rev
        if latest, !tree.isLeaf(rev), let leaf = tree.leaves.first(where: { tree.isAncestor(rev, of: $0.revisionID) }) {
            wanted = leaf.revisionID
        }
        guard let d = try db.revision(wanted, of: id) else { throw RESTError.notFound("missing") }
        return d
    }

    /// A revision's JSON object with its attachments rendered for `mode` (CouchDB's stubs, or
    /// with the bytes of those changed after generation `since`), and the parts that follow.
    static func documentObject(_ db: Database, _ doc: Document, tree: RevisionTree?, revs: Bool, revsInfo: Bool = false,
                               conflicts: Bool = false, mode: AttachmentRendering.Mode, since: Int? = nil)
        -> (json: [String: JSONValue], parts: [AttachmentRendering.Part]) {
        documentObject(db, doc, tree: tree, extras: DocumentJSON.Extras(revs: revs, revsInfo: revsInfo, conflicts: conflicts),
                       mode: mode, since: since)
    }

    /// `documentObject` with every extra member CouchDB can add (`DocumentJSON.Extras`).
    static func documentObject(_ db: Database, _ doc: Document, tree: RevisionTree?, extras: DocumentJSON.Extras,
                               mode: AttachmentRendering.Mode, since: Int? = nil)
        -> (json: [String: JSONValue], parts: [AttachmentRendering.Part]) {
        var o = DocumentJSON.object(doc, tree: tree, extras).objectValue ?? [:]
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
        if let m = r.header("If-Match") { candidates.append(m.trimming { $0 == "\"" }) }
        if let body { candidates.append(body) }
        guard let first = candidates.first else { return nil }
        guard candidates.allSatisfy({ $0 == first }) else {
            throw .badRequest("Document rev from request body and query string have different values")
        }
        return first
    }

    func writeDocument(_ c: Context, id: String, body: [String: JSONValue]) async throws(RESTError) -> RESTResponse {
        // Inline and following attachment bytes become blobs before the save (AttachmentBodies).
        try DocumentJSON.checkRevisionsShape(body["_revisions"])
        let incoming = DocumentJSON.incoming(try storingAttachmentData(c, id: id, body: body))
        let revText = try Self.namedRevision(c.request, body: incoming.rev)
        let batch = c.request[query: "batch"] == "ok"
        let result: (id: String, rev: String)
        do throws(RESTError) {
            if c.request[query: "new_edits"] == "false" {
                guard let revText else { throw RESTError.badRequest("new_edits=false needs the document's _rev") }
                result = try await insertReplicated(c.db, id: id, rev: revText, incoming: incoming)
            } else {
                result = try await save(c.db, id: id, rev: revText, incoming: incoming)
            }
        } catch {
            // CouchDB answers `batch=ok` before it writes, so a conflict there is never told.
            guard batch, error.status == 409 else { throw error }
            return .json(202, .object(["ok": true, "id": .string(id)]))
        }
        // `batch=ok`: CouchDB's 202 names no revision (it has none yet), so neither ETag nor
        // Location; a deletion by `_deleted` is 200, as a DELETE is.
        if batch { return .json(202, .object(["ok": true, "id": .string(result.id)])) }
        let location = ("Location", Self.documentLocation(db: c.name, id: id))
        let body = JSONValue.object(["ok": true, "id": .string(result.id), "rev": .string(result.rev)])
        // CouchDB's `POST /{db}` answers Location without ETag; a PUT both.
        if c.request.method == "POST" { return .json(201, body, headers: [location]) }
        return .json(incoming.deleted ? 200 : 201, body, headers: [("ETag", "\"\(result.rev)\""), location])
    }

    /// Saves a new revision whose parent is `rev` (nil: a new document), failing on conflict.
    func save(_ db: Database, id: String, rev revText: String?, incoming: DocumentJSON.Incoming) async throws(RESTError) -> (id: String, rev: String) {
        do {
            let parent = try revText.map { (t) throws(StoreError) in try RevisionID(t) }
            let doc = Document(id: id, basedOn: parent, properties: incoming.properties)
            let deleted = incoming.deleted
            let saved = try await db.write { (db) throws(StoreError) in
                deleted ? try db.delete(doc, concurrencyControl: .failOnConflict) : try db.save(doc, concurrencyControl: .failOnConflict)
            }
            return (id, saved.revisionID?.description ?? "")
        } catch { throw Self.documentError(error) }
    }

    /// The store's refusal of a document as CouchDB names it: a special member it does not
    /// know is `doc_validation`, as CouchDB's validation of the body calls it.
    static func documentError(_ e: StoreError) -> RESTError {
        if case .reservedProperty(let p) = e { return RESTError(400, "doc_validation", "Bad special document member: \(p)") }
        return RESTError(e)
    }

    /// Stores a revision made elsewhere with its history (`new_edits=false`), as replication does.
    func insertReplicated(_ db: Database, id: String, rev: String, incoming: DocumentJSON.Incoming) async throws(RESTError) -> (id: String, rev: String) {
        let history = try DocumentJSON.replicatedHistory(rev: rev, revisions: incoming.revisions)
        let properties = DocumentJSON.replicatedProperties(incoming)
        let r = ReplicatedRevision(documentID: id, history: history, body: CanonicalJSON.encode(properties), isDeleted: incoming.deleted)
        do { _ = try await db.write { (d) throws(StoreError) in try d.insert(r) } } catch { throw Self.documentError(error) }
        return (id, rev)
    }

    /// CouchDB's DELETE: 404 unless the document exists and is live (a tombstone is not
    /// deleted again), 409 without a revision; the current revision is deleted as a save, and
    /// a losing conflict leaf (conflict policy `keep`) by a tombstone child of that leaf, so
    /// the branch is closed and listed in `_deleted_conflicts`, as CouchDB does.
    private func deleteDocument(_ c: Context, _ id: String) async throws(RESTError) -> RESTResponse {
        let current: Document?
        do { current = try c.db.document(id) } catch { throw RESTError(error) }
        guard let current else {
            let exists = (try? c.db.documentJSON(id)) != nil
            throw .notFound(exists ? "deleted" : "missing")
        }
        guard let revText = try Self.namedRevision(c.request, body: nil) else { throw .conflict }
        guard let rev = try Self.parseRevision(revText) else { throw .conflict }
        let result: (id: String, rev: String)
        if rev != current.revisionID, let tree = try? c.db.revisionTree(of: id), tree.isLeaf(rev), tree.nodes[rev]?.isDeleted == false {
            result = try await deleteLosingLeaf(c.db, id: id, leaf: rev, tree: tree)
        } else {
            var incoming = DocumentJSON.incoming([:])
            incoming.deleted = true
            result = try await save(c.db, id: id, rev: revText, incoming: incoming)
        }
        return .json(200, .object(["ok": true, "id": .string(result.id), "rev": .string(result.rev)]),
                     headers: [("ETag", "\"\(result.rev)\"")])
    }

    /// Closes the live leaf `leaf` that is not the current revision with a deletion, inserted
    /// as a replicated revision: the store's saves continue the current revision only (its
    /// concurrency control), while CouchDB lets a client delete any leaf. The tombstone's ID is
    /// the one a save would compute for an empty deletion.
    private func deleteLosingLeaf(_ db: Database, id: String, leaf: RevisionID, tree: RevisionTree) async throws(RESTError) -> (id: String, rev: String) {
        let body = CanonicalJSON.encode(.object([:]))
        let tombstone = RevisionID.make(parent: leaf, deleted: true, canonicalBody: body)
        let history = [tombstone.description] + tree.history(of: leaf).map(\.description)
        let tombstoneRevision = ReplicatedRevision(documentID: id, history: history, body: body, isDeleted: true)
        do { _ = try await db.write { (d) throws(StoreError) in try d.insert(tombstoneRevision) } } catch {
            throw RESTError(error)
        }
        return (id, tombstone.description)
    }
}
