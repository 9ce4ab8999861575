/// What the store remembers about remote peers: the latest revision of each document known to
/// be on a remote (kept unpruned, with its body — reference §4.2). A pusher names it as the
/// remote parent in `proposeChanges`; a conflict resolution continues from it.
extension Database {
    /// The latest revision known to be on `remote` for each of `documentIDs` that has one.
    public func remoteRevisions(of documentIDs: [String], remote: String) throws(StoreError) -> [String: RevisionID] {
        guard !documentIDs.isEmpty else { return [:] }
        return try remoteRevisions(in: revisionTrees(of: documentIDs), remote: remote)
    }

    /// The latest revision known to be on `remote` in each of these trees that has one (for a
    /// caller that already read the trees, e.g. to build its `rev` messages from them too).
    public func remoteRevisions(in trees: [String: RevisionTree], remote: String) throws(StoreError) -> [String: RevisionID] {
        guard !trees.isEmpty else { return [:] }
        let key = try readers.withReader { (c) throws(StoreError) -> Int? in
            let k = try c.prepare("SELECT remote_key FROM remotes WHERE address = ?")
            defer { k.reset() }
            k.bind(1, remote)
            return try k.step() ? k.int(0) : nil
        }
        guard let key else { return [:] }
        return trees.compactMapValues { $0.remoteRevisions[key] }
    }

    /// Records that `remote` now has these revisions (after it acknowledged them), in one
    /// transaction. Revisions no longer in a document's tree are ignored. Assigns no sequence
    /// and leaves the document rows alone: this is bookkeeping, not a change to replicate
    /// (`AcknowledgedRevisions` says where it goes).
    public func setRemoteRevisions(_ revisions: [(documentID: String, revisionID: RevisionID)], remote: String) throws(StoreError) {
        guard !revisions.isEmpty else { return }
        try inBatch { (b) throws(StoreError) in
            try b.txn.recordAcknowledged(revisions, remote: b.txn.remoteKey(remote))
        }
    }
}

extension Database {
    /// Suspends until a change after `sequence` is committed; returns false if the task is
    /// cancelled or the database closes first. What a continuous replication waits on.
    public func waitForChange(after sequence: Int64) async -> Bool {
        await writer.notifier.wait(after: sequence)
    }
}

extension Database {
    /// The revision trees of several documents read in one read transaction (missing ones are
    /// absent from the result): what the replicator reads per batch.
    public func revisionTrees(of documentIDs: [String]) throws(StoreError) -> [String: RevisionTree] {
        guard !documentIDs.isEmpty else { return [:] }
        return try readers.withReader { (c) throws(StoreError) -> [String: RevisionTree] in
            try c.execute("BEGIN")
            defer { try? c.execute("COMMIT") }
            let s = try c.prepare("SELECT body, tree FROM docs WHERE doc_id = ?")
            let acks = try c.prepare(AcknowledgedRevisions.selectSQL)
            var out: [String: RevisionTree] = [:]
            out.reserveCapacity(documentIDs.count)
            for id in documentIDs {
                defer { s.reset() }
                s.bind(1, id)
                guard try s.step() else { continue }
                var tree = try RevisionTreeCodec.decode(s.bytes(1), currentBody: s.bytes(0), documentID: id)
                _ = try AcknowledgedRevisions.apply(acks, documentID: id, to: &tree)
                out[id] = tree
            }
            return out
        }
    }
}
