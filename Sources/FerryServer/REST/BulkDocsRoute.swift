import FerryStore

/// `POST /{db}/_bulk_docs` (Protocol/rest.md, "Bulk writes"): many documents in one store
/// transaction. With `new_edits` (the default) each is saved like a `PUT` and gets its own
/// result; with `"new_edits": false` they are replicated revisions with their histories, and
/// only failures are listed, as CouchDB does.
extension RESTRouter {
    func bulkDocs(_ c: Context) async throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        guard let docs = body["docs"]?.arrayValue else { throw .badRequest("POST body must include `docs` parameter.") }
        if let v = body["new_edits"], v.boolValue == nil { throw .badRequest("`new_edits` parameter must be a boolean.") }
        let newEdits = body["new_edits"]?.boolValue ?? true
        if body["all_or_nothing"]?.boolValue == true {
            // CouchDB 2+ dropped it and answers each document so, with 417 for the request.
            let rows: [JSONValue] = docs.map { d in
                .object(["id": d.objectValue?["_id"] ?? .null, "rev": "0-", "error": "not_implemented",
                         "reason": "all_or_nothing is not supported"])
            }
            return .json(417, .array(rows))
        }
        // Malformed as a whole, as CouchDB refuses it: a replicated document without its
        // revision, or a special member Ferry does not know (`_foo`); then an ID CouchDB
        // reserves (or an empty one), before writing any — such a batch is malformed, not one
        // document's failure. (One pass: this runs for every document of every batch.)
        var reserved: String?
        for d in docs {
            guard case .object(let o) = d else { continue }
            if !newEdits, o["_rev"] == nil, o["_revisions"] == nil {
                throw .badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
            }
            for key in o.keys where key.utf8.first == UInt8(ascii: "_") && !Self.specialMembers.contains(key) {
                throw RESTError(400, "doc_validation", "Bad special document member: \(key)")
            }
            if reserved == nil, case .string(let id)? = o["_id"], Self.isReservedID(id) { reserved = id }
        }
        if let reserved { throw .illegalDocumentID(reserved) }
        var items: [(id: String, incoming: DocumentJSON.Incoming)] = []
        items.reserveCapacity(docs.count)
        var forbidden: [JSONValue] = []
        let mayWriteDesign = c.role >= .admin
        var locals: [JSONValue] = []
        for d in docs {
            guard let o = d.objectValue else { throw .badRequest("Document must be a JSON object") }
            // `_local/` documents are written as they are (no history), as CouchDB does.
            if let id = o["_id"]?.stringValue, id.hasPrefix("_local/") {
                var props = o
                for k in ["_id", "_rev", "_revisions"] { props[k] = nil }
                let localID = String(id.dropFirst(7)), properties = props
                do {
                    let rev = try await c.db.write { (d) throws(StoreError) in try d.putLocalDocument(localID, properties: properties) }
                    if newEdits { locals.append(.object(["ok": true, "id": .string(id), "rev": .string(rev)])) }
                } catch { locals.append(Self.itemError(id, RESTError(error))) }
                continue
            }
            // A design document needs the admin role; a writer's is refused alone, as CouchDB
            // does, and its inline attachments are not even kept as blobs.
            if !mayWriteDesign, let id = o["_id"]?.stringValue, Document.isDesignID(id) {
                if newEdits {
                    items.append((id, DocumentJSON.incoming([:])))  // answered in its place by saveAll
                } else {
                    forbidden.append(Self.itemError(id, Self.forbiddenFor(.admin), rev: o["_rev"]?.stringValue))
                }
                continue
            }
            // Inline attachment bytes become blobs before the batch (AttachmentBodies).
            let incoming = DocumentJSON.incoming(try Self.storingAttachmentData(c.db, id: o["_id"]?.stringValue, body: o,
                                                                                parentRevs: Self.parentRevisions(nil, o), following: [:]))
            items.append((incoming.id ?? Self.newID(), incoming))
        }
        let answer = newEdits ? try await saveAll(c.db, items, mayWriteDesign: mayWriteDesign)
                              : try await insertAll(c.db, items, refused: forbidden)
        guard !locals.isEmpty, case .bytes(let bytes) = answer.body, case .array(let rows)? = try? JSONParser.parse(bytes) else { return answer }
        return .json(answer.status, .array(locals + rows))
    }

    /// The `_` members a document body may carry (CouchDB's list; others are refused).
    static let specialMembers: Set<String> = ["_id", "_rev", "_deleted", "_attachments", "_revisions", "_revs_info",
                                              "_conflicts", "_deleted_conflicts", "_local_seq"]

    /// Whether CouchDB refuses `id` as a document ID outright: empty, or starting with `_`
    /// without being a design document's or a local document's.
    static func isReservedID(_ id: String) -> Bool {
        id.isEmpty || (id.hasPrefix("_") && !Document.isDesignID(id) && !id.hasPrefix("_local/"))
    }

    private func saveAll(_ db: Database, _ items: [(id: String, incoming: DocumentJSON.Incoming)],
                         mayWriteDesign: Bool) async throws(RESTError) -> RESTResponse {
        let results: [JSONValue]
        do {
            results = try await db.write { (db) throws(StoreError) in try db.inBatch { (b) throws(StoreError) -> [JSONValue] in
                var out: [JSONValue] = []
                out.reserveCapacity(items.count)
                for (id, incoming) in items {
                    if !mayWriteDesign, Document.isDesignID(id) {
                        out.append(Self.itemError(id, Self.forbiddenFor(.admin)))
                        continue
                    }
                    do throws(StoreError) {
                        // A `_rev` that is not a revision ID here cannot be the current one: a
                        // conflict for this document, as CouchDB answers (not a 400 for all).
                        let parent = try incoming.rev.map { (t) throws(StoreError) in
                            do throws(StoreError) { return try RevisionID(t) } catch { throw .conflict(documentID: id) }
                        }
                        let doc = Document(id: id, basedOn: parent, properties: incoming.properties)
                        let saved = incoming.deleted ? try b.delete(doc, concurrencyControl: .failOnConflict)
                                                     : try b.save(doc, concurrencyControl: .failOnConflict)
                        out.append(.object(["ok": true, "id": .string(id), "rev": .string(saved.revisionID?.description ?? "")]))
                    } catch {
                        if error.isFatal { throw error }
                        out.append(Self.itemError(id, RESTError(error)))
                    }
                }
                return out
            } }
        } catch { throw RESTError(error) }
        return .json(201, .array(results))
    }

    /// `refused`: the items already answered (a writer's design documents).
    private func insertAll(_ db: Database, _ items: [(id: String, incoming: DocumentJSON.Incoming)],
                           refused alreadyRefused: [JSONValue]) async throws(RESTError) -> RESTResponse {
        var revisions: [ReplicatedRevision] = []
        var refused = alreadyRefused
        for (id, incoming) in items {
            guard let rev = incoming.rev else {
                refused.append(Self.itemError(id, .badRequest("new_edits=false needs each document's _rev")))
                continue
            }
            let history: [String]
            do { history = try DocumentJSON.replicatedHistory(rev: rev, revisions: incoming.revisions) } catch {
                refused.append(Self.itemError(id, error))
                continue
            }
            let properties = DocumentJSON.replicatedProperties(incoming)
            revisions.append(ReplicatedRevision(documentID: id, history: history, body: CanonicalJSON.encode(properties),
                                                isDeleted: incoming.deleted))
        }
        let outcomes: [Result<InsertOutcome, StoreError>]
        let replicated = revisions
        do { outcomes = try await db.write { (d) throws(StoreError) in try d.insert(replicated) } } catch { throw RESTError(error) }
        for (r, outcome) in zip(revisions, outcomes) {
            if case .failure(let e) = outcome { refused.append(Self.itemError(r.documentID, RESTError(e))) }
        }
        return .json(201, .array(refused))
    }

    /// One document's failure in CouchDB's shape; `rev` is the revision a `new_edits: false`
    /// item carried, which CouchDB names too.
    static func itemError(_ id: String, _ e: RESTError, rev: String? = nil) -> JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "error": .string(e.error), "reason": .string(e.reason)]
        if let rev { o["rev"] = .string(rev) }
        return .object(o)
    }
}
