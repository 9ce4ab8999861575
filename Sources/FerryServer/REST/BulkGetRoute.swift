import FerryStore

/// `POST /{db}/_bulk_get` (Protocol/rest.md, "Replication endpoints"): many revisions in one
/// request, as CouchDB's replicator fetches what `_revs_diff` said was missing.
extension RESTRouter {
    /// `{"docs":[{"id","rev"?}]}` → `{"results":[{"id","docs":[{"ok":doc}|{"error":{…}}]}]}`,
    /// one result per item in order. Options: `revs=true` (`_revisions`), `attachments=true`
    /// (inline `data`), `latest=true` (a named revision that has descendants is answered with
    /// the leaves that descend from it).
    func bulkGet(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        let body = try Self.jsonObject(c.request)
        guard let items = body["docs"]?.arrayValue else { throw .badRequest("POST body must include `docs` parameter.") }
        let flag = { (name: String) in c.request[query: name] == "true" }
        let (revs, latest, attachments) = (flag("revs"), flag("latest"), flag("attachments"))
        // `Accept: multipart/related`: CouchDB's multipart answer, every attachment following.
        let multipart = Self.accepts(c.request, "multipart/related")
        let mode: AttachmentRendering.Mode = multipart ? .follows : (attachments ? .inline : .stubs)
        var results: [JSONValue] = []
        results.reserveCapacity(items.count)
        var writer = MultipartWriter()
        for item in items {
            guard let o = item.objectValue, let id = o["id"]?.stringValue else {
                // CouchDB: an item without an ID is answered with null `id` and `rev`.
                let error = Self.bulkGetError(id: nil, rev: .null, .badRequest("each item needs a string `id`"))
                results.append(.object(["id": .null, "docs": .array([error])]))
                if multipart { Self.bulkGetErrorPart(&writer, error) }
                continue
            }
            let revText = o["rev"]?.stringValue
            var docs: [JSONValue] = []
            do {
                let tree = try c.db.revisionTree(of: id)
                for doc in try Self.bulkGetRevisions(c.db, id: id, rev: revText, latest: latest, allLeaves: true) {
                    let (json, parts) = Self.documentObject(c.db, doc, tree: tree, revs: revs, mode: mode)
                    docs.append(.object(["ok": .object(json)]))
                    guard multipart else { continue }
                    writer.revision(json, attachments: parts, extra: [("X-Doc-Id", id), ("X-Rev-Id", doc.revisionID?.description ?? "")])
                }
            } catch let e as RESTError {
                // CouchDB names a missing document's revision "undefined" when none was asked.
                docs = [Self.bulkGetError(id: id, rev: .string(revText ?? "undefined"), e)]
                if multipart { Self.bulkGetErrorPart(&writer, docs[0]) }
            } catch let e as StoreError {
                if e.isFatal { throw RESTError(e) }
                docs = [Self.bulkGetError(id: id, rev: .string(revText ?? "undefined"), RESTError(e))]
                if multipart { Self.bulkGetErrorPart(&writer, docs[0]) }
            } catch {
                throw RESTError(500, "internal_server_error", "\(error)")
            }
            results.append(.object(["id": .string(id), "docs": .array(docs)]))
        }
        if multipart {
            return RESTResponse(status: 200, headers: [("Content-Type", writer.contentType("related"))], body: .bytes(writer.finished()))
        }
        return .json(200, .object(["results": .array(results)]))
    }

    /// A multipart `_bulk_get` answer's part for an error item, as CouchDB marks it.
    private static func bulkGetErrorPart(_ writer: inout MultipartWriter, _ item: JSONValue) {
        let error = item.objectValue?["error"] ?? item
        writer.part([("Content-Type", "application/json; error=\"true\"")], CanonicalJSON.encode(error))
    }

    /// The revisions one item asks for: the named one (or, with `latest`, the leaves that
    /// descend from it), or without one the current revision, deleted or not — or with
    /// `allLeaves` every leaf, as CouchDB's `_bulk_get` answers (its `open_revs=all`).
    static func bulkGetRevisions(_ db: Database, id: String, rev revText: String?, latest: Bool, allLeaves: Bool = false) throws -> [Document] {
        guard let revText else {
            if allLeaves, let tree = try db.revisionTree(of: id) {
                let docs = try leavesInTreeOrder(tree).compactMap { try db.revision($0, of: id) }
                if !docs.isEmpty { return docs }
            }
            guard let doc = try db.document(id, includeDeleted: true) else { throw RESTError.notFound("missing") }
            return [doc]
        }
        guard let rev = try? RevisionID(revText) else { throw RESTError.badRequest("Invalid rev format: \(revText.debugDescription)") }
        // Only leaf bodies are kept: a write between reading the tree and reading the body can
        // make the named leaf an inner revision, its body gone. With `latest`, look again — it
        // now has descendants to answer with (a reader racing writers saw "missing" otherwise).
        for _ in 0..<3 {
            if latest, let tree = try db.revisionTree(of: id), tree.nodes[rev] != nil, !tree.isLeaf(rev) {
                let leaves = try tree.leaves.filter { tree.isAncestor(rev, of: $0.revisionID) }.compactMap { try db.revision($0.revisionID, of: id) }
                if !leaves.isEmpty { return leaves }
            }
            if let doc = try db.revision(rev, of: id) { return [doc] }
            guard latest else { break }
        }
        throw RESTError.notFound("missing")
    }

    private static func bulkGetError(id: String?, rev: JSONValue, _ e: RESTError) -> JSONValue {
        let o: [String: JSONValue] = ["id": id.map { .string($0) } ?? .null, "rev": rev, "error": .string(e.error), "reason": .string(e.reason)]
        return .object(["error": .object(o)])
    }
}
