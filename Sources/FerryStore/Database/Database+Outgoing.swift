import CSQLite

extension Database {
    /// What sending each of these changes' revisions needs (`OutgoingRevision`), in the order of
    /// `changes`, with at most `historyLimit` ancestors each; nil where the revision or its body
    /// is no longer kept (superseded and pruned since it was listed). One read transaction.
    ///
    /// A dense batch — a page of the change feed, what a sender sends — is read in one scan of
    /// its sequence range, each row matched to its change by sequence, and each tree read in
    /// place without building it: the per-revision cost of a replication's sending side. A
    /// document changed again since it was listed (now past the range), and a sparse batch, are
    /// read through their trees.
    public func outgoingRevisions(of changes: [Change], historyLimit: Int) throws(StoreError) -> [OutgoingRevision?] {
        guard let first = changes.first else { return [] }
        var low = first.sequence, high = first.sequence
        for c in changes { low = min(low, c.sequence); high = max(high, c.sequence) }
        // A sparse batch (a filtered push) would scan rows nobody wants.
        let dense = high - low < 2 * Int64(changes.count) + 16
        return try readers.withSnapshot { (c) throws(StoreError) -> [OutgoingRevision?] in
            var out = [OutgoingRevision?](repeating: nil, count: changes.count)
            var found = [Bool](repeating: false, count: changes.count)
            if dense {
                // The change listed at each sequence of the range (-1: none).
                var slot = [Int32](repeating: -1, count: Int(high - low) + 1)
                for (i, c) in changes.enumerated() { slot[Int(c.sequence - low)] = Int32(i) }
                let s = try c.prepare("SELECT sequence, doc_id, body, tree FROM docs WHERE sequence BETWEEN ? AND ?")
                defer { s.reset() }
                s.bind(1, low)
                s.bind(2, high)
                while try s.step() {
                    let i = Int(slot[Int(s.int64(0) - low)])
                    guard i >= 0, s.textEquals(1, changes[i].documentID) else { continue }
                    found[i] = true
                    out[i] = try RevisionTreeCodec.outgoing(s.bytes(3), currentBody: s.bytes(2), revision: changes[i].revisionID,
                                                            historyLimit: historyLimit, documentID: changes[i].documentID)
                }
            }
            let missing = changes.indices.filter { !found[$0] }
            guard !missing.isEmpty else { return out }
            var trees: [String: RevisionTree] = [:]
            try Self.readTrees(missing.map { changes[$0].documentID }, on: c, into: &trees)
            for i in missing {
                out[i] = trees[changes[i].documentID]?.outgoing(changes[i].revisionID, historyLimit: historyLimit)
            }
            return out
        }
    }
}

extension Database {
    /// Up to `limit` changes after `since`, each with what sending it to `remote` needs
    /// (`OutgoingPage`), at most `historyLimit` ancestors per revision; one read transaction, one
    /// scan of the feed: what an active push reads per batch.
    public func outgoingPage(since: Int64, limit: Int, remote: String, historyLimit: Int) throws(StoreError) -> OutgoingPage {
        guard limit > 0 else { throw .invalidArgument("limit must be positive") }
        return try readers.withSnapshot { (c) throws(StoreError) -> OutgoingPage in
            let purges = try WriteTransaction.purgeCount(c)
            let key = try Self.remoteKey(remote, on: c)
            // One row per change: only the remote's own acknowledgement is joined.
            let s = try c.prepare("""
                SELECT d.doc_id, d.rev_id, d.deleted, d.sequence, d.body, d.tree, d.conflicted, r.rev_id
                FROM (SELECT doc_id, rev_id, deleted, sequence, body, tree, conflicted FROM docs
                      WHERE sequence > ? ORDER BY sequence LIMIT ?) d
                LEFT JOIN remote_revs r ON r.doc_id = d.doc_id AND r.remote_key = ?
                """)
            defer { s.reset() }
            s.bind(1, since)
            s.bind(2, limit)
            s.bind(3, key ?? -1)
            var entries: [OutgoingPage.Entry] = []
            entries.reserveCapacity(min(limit, 1024))
            var otherLeaves: [String] = []
            // The join keeps the subquery's order in practice; sorted here if it did not.
            var ordered = true
            while try s.step() {
                let id = s.string(0)
                let rev = try s.revisionID(1, of: id)
                let change = Change(documentID: id, revisionID: rev, isDeleted: s.int(2) != 0, sequence: s.int64(3),
                                    hasOtherLeaves: s.int(6) & 2 != 0)
                let tree = try RevisionTreeCodec.locate(s.bytes(5), documentID: id, remote: key)
                let revision = tree.index(of: rev).flatMap { tree.outgoing(at: $0, currentBody: s.bytes(4), historyLimit: historyLimit) }
                var pinned = tree.pinned.map { tree.nodes[$0].revisionID }
                // An acknowledgement not yet moved into the tree wins, if the tree holds it
                // (as `AcknowledgedRevisions.apply` has it).
                if !s.isNull(7), let acknowledged = try? RevisionID(s.string(7)), tree.index(of: acknowledged) != nil {
                    pinned = acknowledged
                }
                if let previous = entries.last, previous.change.sequence > change.sequence { ordered = false }
                if change.hasOtherLeaves { otherLeaves.append(id) }
                entries.append(OutgoingPage.Entry(change: change, revision: revision, remoteRevision: pinned))
            }
            s.reset()
            if !ordered { entries.sort { $0.change.sequence < $1.change.sequence } }
            var trees: [String: RevisionTree] = [:]
            try Self.readTrees(otherLeaves, on: c, into: &trees)
            return OutgoingPage(entries: entries, otherLeafTrees: trees, purgeCount: purges)
        }
    }

    /// The key `remote`'s pins are kept under, if it has any.
    static func remoteKey(_ remote: String, on c: Connection) throws(StoreError) -> Int? {
        let k = try c.prepare("SELECT remote_key FROM remotes WHERE address = ?")
        defer { k.reset() }
        k.bind(1, remote)
        return try k.step() ? k.int(0) : nil
    }
}
