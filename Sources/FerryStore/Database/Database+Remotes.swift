/// What the store remembers about remote peers: the latest revision of each document known to
/// be on a remote (kept unpruned, with its body — Protocol/revisions.md, "Revision tree"). A pusher names it as the
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
        let key = try readers.withReader { (c) throws(StoreError) -> Int? in try Self.remoteKey(remote, on: c) }
        guard let key else { return [:] }
        return trees.compactMapValues { $0.remoteRevisions[key] }
    }

    /// Records that `remote` now has these revisions (after it acknowledged them), in one
    /// transaction. Revisions no longer in a document's tree are ignored. Assigns no sequence
    /// and leaves the document rows alone: this is bookkeeping, not a change to replicate
    /// (`AcknowledgedRevisions` says where it goes).
    ///
    /// `purgeCountBefore`, if given, is `purgeCount()` read before the revisions were (e.g.
    /// before the trees a pusher sent them from): when nothing was purged since, the documents
    /// are known to exist and are not looked up again — a pusher's largest store cost.
    public func setRemoteRevisions(_ revisions: [(documentID: String, revisionID: RevisionID)], remote: String,
                                   purgeCountBefore: Int64? = nil) throws(StoreError) {
        guard !revisions.isEmpty else { return }
        try inBatch { (b) throws(StoreError) in
            try b.txn.recordAcknowledged(revisions, remote: b.txn.remoteKey(remote), purgesBefore: purgeCountBefore)
        }
    }

    /// Forgets which revisions `remote` has (a peer that was wiped or restored from an older
    /// backup at the same address no longer has them): the address gets a new, empty remote
    /// entry, so pushers propose everything again without a remote parent. O(1): the old
    /// entry's pins stay in the trees under its old number, which no address names any more.
    public func forgetRemote(_ remote: String) throws(StoreError) {
        try inBatch { (b) throws(StoreError) in
            let u = try b.txn.conn.prepare("""
                UPDATE remotes SET address = address || '#forgotten-' || remote_key || '-' || hex(randomblob(4))
                WHERE address = ?
                """)
            u.bind(1, remote)
            try u.run()
        }
    }

    /// How many documents this file has seen purged, ever (kept by a trigger in the file, so
    /// other processes' purges count too): equal readings mean no purge happened between them.
    public func purgeCount() throws(StoreError) -> Int64 {
        try readers.withReader { (c) throws(StoreError) -> Int64 in try WriteTransaction.purgeCount(c) }
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
        return try readers.withSnapshot { (c) throws(StoreError) -> [String: RevisionTree] in
            var out: [String: RevisionTree] = [:]
            out.reserveCapacity(documentIDs.count)
            try Self.readTrees(documentIDs, on: c, into: &out)
            return out
        }
    }

    /// The revision trees of the documents of a batch of changes (as `revisionTrees(of:)` with
    /// their IDs). A dense batch — a page of the change feed, what a pusher sends — is read in
    /// one scan of its sequence range, with the acknowledged revisions joined in, rather than
    /// one lookup by ID per document; a document changed again since (now past the range) is
    /// then looked up by ID.
    public func revisionTrees(of changes: [Change]) throws(StoreError) -> [String: RevisionTree] {
        guard let first = changes.first else { return [:] }
        var low = first.sequence, high = first.sequence
        for c in changes { low = min(low, c.sequence); high = max(high, c.sequence) }
        // A sparse batch (a filtered push) would scan rows nobody wants.
        guard high - low < 2 * Int64(changes.count) + 16 else { return try revisionTrees(of: changes.map(\.documentID)) }
        let wanted = Set(changes.map(\.documentID))
        return try readers.withSnapshot { (c) throws(StoreError) -> [String: RevisionTree] in
            var out: [String: RevisionTree] = [:]
            out.reserveCapacity(wanted.count)
            let s = try c.prepare("""
                SELECT d.doc_id, d.body, d.tree, r.remote_key, r.rev_id
                FROM docs d LEFT JOIN remote_revs r ON r.doc_id = d.doc_id
                WHERE d.sequence BETWEEN ? AND ?
                """)
            defer { s.reset() }
            s.bind(1, low)
            s.bind(2, high)
            while try s.step() {
                let id = s.string(0)
                guard wanted.contains(id) else { continue }
                try Self.addJoinedRow(s, documentID: id, from: 1, into: &out)
            }
            s.reset()
            if out.count < wanted.count {
                try Self.readTrees(wanted.filter { out[$0] == nil }, on: c, into: &out)
            }
            return out
        }
    }

    /// `changes(since:limit:)` and `revisionTrees(of:)` of those changes in one scan of one
    /// read transaction: what a pusher that proposes every change reads per batch.
    public func changesWithTrees(since: Int64, limit: Int) throws(StoreError) -> (changes: [Change], trees: [String: RevisionTree]) {
        guard limit > 0 else { throw .invalidArgument("limit must be positive") }
        return try readers.withReader { (c) throws(StoreError) -> ([Change], [String: RevisionTree]) in
            let s = try c.prepare("""
                SELECT d.doc_id, d.rev_id, d.deleted, d.sequence, d.body, d.tree, r.remote_key, r.rev_id, d.conflicted
                FROM (SELECT doc_id, rev_id, deleted, sequence, body, tree, conflicted FROM docs
                      WHERE sequence > ? ORDER BY sequence LIMIT ?) d
                LEFT JOIN remote_revs r ON r.doc_id = d.doc_id
                """)
            defer { s.reset() }
            s.bind(1, since)
            s.bind(2, limit)
            var changes: [Change] = []
            var trees: [String: RevisionTree] = [:]
            changes.reserveCapacity(min(limit, 1024))
            trees.reserveCapacity(min(limit, 1024))
            // No ORDER BY on the join: SQLite would sort the rows, bodies and all, in a temporary
            // b-tree. A document's rows (one per pin) are told apart by its ID instead, and the
            // few changes sorted here if they came out of order.
            var ordered = true
            while try s.step() {
                let id = s.string(0)
                if trees[id] == nil {
                    let sequence = s.int64(3)
                    let rev = try s.revisionID(1, of: id)
                    if let previous = changes.last, previous.sequence > sequence { ordered = false }
                    changes.append(Change(documentID: id, revisionID: rev, isDeleted: s.int(2) != 0, sequence: sequence,
                                          hasOtherLeaves: s.int(8) & 2 != 0))
                }
                try Self.addJoinedRow(s, documentID: id, from: 4, into: &trees)
            }
            if !ordered { changes.sort { $0.sequence < $1.sequence } }
            return (changes, trees)
        }
    }

    /// Adds one row of a scan of `docs` with `remote_revs` left-joined — columns `first`...:
    /// body, tree, remote_key, rev_id — to `out`: the tree the first time its document appears
    /// (the join repeats a document once per pin), then the row's pin, if any.
    private static func addJoinedRow(_ s: Statement, documentID id: String, from first: Int32,
                                     into out: inout [String: RevisionTree]) throws(StoreError) {
        if out[id] == nil {
            out[id] = try RevisionTreeCodec.decode(s.bytes(first + 1), currentBody: s.bytes(first), documentID: id)
        }
        guard !s.isNull(first + 2) else { return }
        AcknowledgedRevisions.apply(remote: s.int(first + 2), revision: s.string(first + 3), to: &out[id, default: RevisionTree()])
    }

    /// Reads the trees of `documentIDs`, with their acknowledged revisions, in one statement:
    /// the IDs go in as a JSON array (CROSS JOIN keeps it the outer loop, each ID one index
    /// lookup). A statement per ID cost more than the lookup itself — most of a puller's
    /// `changes` answer, where every ID is new.
    static func readTrees(_ documentIDs: some Collection<String>, on c: Connection,
                                  into out: inout [String: RevisionTree]) throws(StoreError) {
        guard !documentIDs.isEmpty else { return }
        let ids = JSONValue.array(Set(documentIDs).map { .string($0) })
        let s = try c.prepare("""
            SELECT d.doc_id, d.body, d.tree, r.remote_key, r.rev_id
            FROM json_each(?) j CROSS JOIN docs d ON d.doc_id = j.value
            LEFT JOIN remote_revs r ON r.doc_id = d.doc_id
            """)
        defer { s.reset() }
        s.bindText(1, CanonicalJSON.encode(ids))
        while try s.step() { try addJoinedRow(s, documentID: s.string(0), from: 1, into: &out) }
    }
}
