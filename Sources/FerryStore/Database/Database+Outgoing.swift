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
