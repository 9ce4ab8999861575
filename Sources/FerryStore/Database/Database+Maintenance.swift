/// What the `ferry` maintenance commands read and do beyond the document API: purging one
/// revision, listing local documents by prefix (replication checkpoints) and the peers the
/// store keeps revisions for.
extension Database {
    /// Bytes the database takes on disk: its file and its write-ahead log (attachments apart).
    public var fileBytes: Int64 { FileSystem.size(atPath: path) + FileSystem.size(atPath: path + "-wal") }

    /// Removes the leaf `revision` of a document and its ancestors back to the fork with
    /// another branch (CouchDB's `_purge` of one revision): no tombstone, nothing to replicate
    /// about the removed revisions. When it was the document's only branch the whole document
    /// goes, as `purge(_:)`. A peer that still has the revision may send it again.
    ///
    /// Throws `.notFound` if there is no such document, `.invalidArgument` if `revision` is not
    /// one of its leaves. Returns the document's current revision afterwards (nil if purged).
    @discardableResult
    public func purge(_ documentID: String, revision: RevisionID) throws(StoreError) -> RevisionID? {
        try inBatch { (b) throws(StoreError) -> RevisionID? in
            let txn = b.txn
            guard let stored = try txn.load(documentID) else { throw .notFound }
            var tree = stored.tree
            guard tree.isLeaf(revision) else {
                throw .invalidArgument("\(revision) is not a leaf of \(documentID)")
            }
            tree.purgeBranch(leaf: revision)
            guard !tree.isEmpty, tree.current != nil else {
                try txn.purge(documentID)
                return nil
            }
            try txn.store(documentID, key: stored.key, tree: &tree)
            return tree.current?.revisionID
        }
    }

    /// The local (not replicated) documents whose IDs start with `prefix`, by ID.
    public func localDocuments(withPrefix prefix: String) throws(StoreError) -> [LocalDocument] {
        try readers.withReader { (c) throws(StoreError) -> [LocalDocument] in
            let s = try c.prepare("SELECT doc_id, generation, body FROM local_docs WHERE substr(doc_id, 1, length(?1)) = ?1 ORDER BY doc_id")
            defer { s.reset() }
            s.bind(1, prefix)
            var out: [LocalDocument] = []
            while try s.step() {
                let id = s.string(0)
                let props = try WriteTransaction.properties(of: s.bytes(2), documentID: id)
                out.append(LocalDocument(id: id, revision: "0-\(s.int(1))", properties: props))
            }
            return out
        }
    }

    /// The peers (replication target URLs) whose latest revisions this store keeps, sorted;
    /// addresses forgotten by `forgetRemote(_:)` are left out.
    public func remoteAddresses() throws(StoreError) -> [String] {
        try readers.withReader { (c) throws(StoreError) -> [String] in
            try c.strings("SELECT address FROM remotes WHERE instr(address, '#forgotten-') = 0 ORDER BY address")
        }
    }
}

extension RevisionTree {
    /// Removes `leaf` and its ancestors up to (not including) the first one with another
    /// child, and drops remote pins on removed revisions.
    mutating func purgeBranch(leaf: RevisionID) {
        var cursor: RevisionID? = leaf
        while let c = cursor, let n = nodes[c], !nodes.values.contains(where: { $0.parent == c }) {
            nodes[c] = nil
            cursor = n.parent
        }
        remoteRevisions = remoteRevisions.filter { nodes[$0.value] != nil }
    }
}
