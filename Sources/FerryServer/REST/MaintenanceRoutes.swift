import FerryStore

/// `POST /{db}/_purge`, `/_compact` and `/_ensure_full_commit` (Protocol/rest.md,
/// "Maintenance and queries").
extension RESTRouter {
    /// `{"docid":["rev",…]}` → `{"purge_seq":null,"purged":{"docid":[revs]}}` (writer). The
    /// store forgets whole documents, so a document is purged only when the named revisions
    /// cover all its leaves; otherwise nothing of it is purged and it is left out of `purged`,
    /// as is a document that does not exist.
    func purge(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        var requests: [(id: String, revs: [String])] = []
        for (id, value) in body {
            guard let revs = value.arrayValue?.compactMap(\.stringValue), revs.count == value.arrayValue?.count else {
                throw .badRequest("_purge: the value of \(id.debugDescription) must be an array of revision strings")
            }
            requests.append((id, revs))
        }
        var purged: [String: JSONValue] = [:]
        for (id, revs) in requests.sorted(by: { $0.id < $1.id }) {
            do {
                guard let tree = try c.db.revisionTree(of: id) else { continue }
                let named = Set(revs.compactMap { try? RevisionID($0) })
                // A closed leaf is the tombstone Ferry left on a resolved conflict's losing
                // branch: no client made it, so none has to name it.
                let leaves = tree.leaves.filter { !$0.isClosed }.map(\.revisionID)
                guard !leaves.isEmpty, leaves.allSatisfy(named.contains) else { continue }
                try c.db.purge(id)
                // CouchDB lists the named revisions that were purged: here all those in the tree.
                let gone = revs.filter { text in (try? RevisionID(text)).map { tree.nodes[$0] != nil } ?? false }
                purged[id] = .array(gone.map { .string($0) })
            } catch .notFound {
                continue  // purged meanwhile by someone else: nothing left to report
            } catch {
                throw RESTError(error)
            }
        }
        return .json(201, .object(["purge_seq": .null, "purged": .object(purged)]))
    }

    /// Deletes the blobs no revision references any more (admin), answered 202 as CouchDB's
    /// background compaction is, though here it has finished by then.
    func compact(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.admin, c)
        do { try c.db.compact() } catch { throw RESTError(error) }
        return .ok(202)
    }

    /// Every commit is already durable to the store's setting; older replicators still call
    /// this after each batch.
    func ensureFullCommit(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        return .json(201, .object(["ok": true, "instance_start_time": "0"]))
    }
}
