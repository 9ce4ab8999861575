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
        var results: [JSONValue] = []
        results.reserveCapacity(items.count)
        for item in items {
            guard let o = item.objectValue, let id = o["id"]?.stringValue else {
                let error = Self.bulkGetError(id: "", rev: nil, .badRequest("each item needs a string `id`"))
                results.append(.object(["id": "", "docs": .array([error])]))
                continue
            }
            let revText = o["rev"]?.stringValue
            var docs: [JSONValue] = []
            do {
                for doc in try Self.bulkGetRevisions(c.db, id: id, rev: revText, latest: latest) {
                    let tree = revs ? try c.db.revisionTree(of: id) : nil
                    let json = Self.documentObject(c.db, doc, tree: tree, revs: revs, mode: attachments ? .inline : .stubs).json
                    docs.append(.object(["ok": .object(json)]))
                }
            } catch let e as RESTError {
                docs = [Self.bulkGetError(id: id, rev: revText, e)]
            } catch let e as StoreError {
                if e.isFatal { throw RESTError(e) }
                docs = [Self.bulkGetError(id: id, rev: revText, RESTError(e))]
            } catch {
                throw RESTError(500, "internal_server_error", "\(error)")
            }
            results.append(.object(["id": .string(id), "docs": .array(docs)]))
        }
        return .json(200, .object(["results": .array(results)]))
    }

    /// The revisions one item asks for: the named one (or, with `latest`, the leaves that
    /// descend from it), or the current revision, deleted or not.
    static func bulkGetRevisions(_ db: Database, id: String, rev revText: String?, latest: Bool) throws -> [Document] {
        guard let revText else {
            guard let doc = try db.document(id, includeDeleted: true) else { throw RESTError.notFound("missing") }
            return [doc]
        }
        guard let rev = try? RevisionID(revText) else { throw RESTError.badRequest("Invalid rev format: \(revText.debugDescription)") }
        if latest, let tree = try db.revisionTree(of: id), tree.nodes[rev] != nil, !tree.isLeaf(rev) {
            let leaves = try tree.leaves.filter { tree.isAncestor(rev, of: $0.revisionID) }.compactMap { try db.revision($0.revisionID, of: id) }
            if !leaves.isEmpty { return leaves }
        }
        guard let doc = try db.revision(rev, of: id) else { throw RESTError.notFound("missing") }
        return [doc]
    }

    private static func bulkGetError(id: String, rev: String?, _ e: RESTError) -> JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "error": .string(e.error), "reason": .string(e.reason)]
        if let rev { o["rev"] = .string(rev) }
        return .object(["error": .object(o)])
    }
}
