import FerryStore

/// `POST /{db}/_bulk_docs` (Protocol/rest.md, "Bulk writes"): many documents in one store
/// transaction. With `new_edits` (the default) each is saved like a `PUT` and gets its own
/// result; with `"new_edits": false` they are replicated revisions with their histories, and
/// only failures are listed, as CouchDB does.
extension RESTRouter {
    func bulkDocs(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        guard let docs = body["docs"]?.arrayValue else { throw .badRequest("POST body must include `docs` parameter.") }
        let newEdits = body["new_edits"]?.boolValue ?? true
        var items: [(id: String, incoming: DocumentJSON.Incoming)] = []
        items.reserveCapacity(docs.count)
        for d in docs {
            guard let o = d.objectValue else { throw .badRequest("Document must be a JSON object") }
            // Inline attachment bytes become blobs before the batch (AttachmentBodies).
            let incoming = DocumentJSON.incoming(try Self.storingAttachmentData(c.db, id: o["_id"]?.stringValue, body: o,
                                                                                parentRevs: Self.parentRevisions(nil, o), following: [:]))
            items.append((incoming.id ?? Self.newID(), incoming))
        }
        return newEdits ? try saveAll(c.db, items) : try insertAll(c.db, items)
    }

    private func saveAll(_ db: Database, _ items: [(id: String, incoming: DocumentJSON.Incoming)]) throws(RESTError) -> RESTResponse {
        let results: [JSONValue]
        do {
            results = try db.inBatch { (b) throws(StoreError) -> [JSONValue] in
                var out: [JSONValue] = []
                out.reserveCapacity(items.count)
                for (id, incoming) in items {
                    do throws(StoreError) {
                        let parent = try incoming.rev.map { (t) throws(StoreError) in try RevisionID(t) }
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
            }
        } catch { throw RESTError(error) }
        return .json(201, .array(results))
    }

    private func insertAll(_ db: Database, _ items: [(id: String, incoming: DocumentJSON.Incoming)]) throws(RESTError) -> RESTResponse {
        var revisions: [ReplicatedRevision] = []
        var refused: [JSONValue] = []
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
            var properties = incoming.properties
            properties.removeValue(forKey: "_deleted")
            revisions.append(ReplicatedRevision(documentID: id, history: history, body: CanonicalJSON.encode(properties),
                                                isDeleted: incoming.deleted))
        }
        let outcomes: [Result<InsertOutcome, StoreError>]
        do { outcomes = try db.insert(revisions) } catch { throw RESTError(error) }
        for (r, outcome) in zip(revisions, outcomes) {
            if case .failure(let e) = outcome { refused.append(Self.itemError(r.documentID, RESTError(e))) }
        }
        return .json(201, .array(refused))
    }

    static func itemError(_ id: String, _ e: RESTError) -> JSONValue {
        .object(["id": .string(id), "error": .string(e.error), "reason": .string(e.reason)])
    }
}
