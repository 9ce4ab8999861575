import Logging

/// Conflict resolution: the one place where a conflict becomes new revisions
/// (Protocol/revisions.md, "Storing a resolution").
extension WriteTransaction {
    /// Where a resolution taken with a warning (`ConflictResolver`) is told.
    static let logger = Logger(label: "ferry.store")

    // MARK: - Conflict resolution (docs/store.md §4; Protocol/revisions.md, "Storing a resolution")

    /// Resolves `local` against `remote` in `tree` by *adding* revisions, never removing one
    /// (Protocol/revisions.md, "Storing a resolution"): the winning leaf stays as it is, or a
    /// merged body (or a custom resolver's deletion) becomes a child of the higher of the two
    /// leaves; the losing leaf, if live, is closed by a tombstone child with
    /// `RevisionTree.closedBody`. Nothing depends on which leaf is called local: two stores
    /// holding the same two leaves and the same (symmetric) resolver make the same revisions,
    /// with IDs computed from parent and body only — and a CouchDB reading the tree picks the
    /// same winner (the only live leaf left), so nothing bounces between them.
    /// Returns the revision made for a new body, if any.
    @discardableResult
    func resolve(_ tree: inout RevisionTree, documentID: String, local: RevisionID, remote: RevisionID,
                 resolver: ConflictResolver) throws(StoreError) -> RevisionID? {
        let resolution = try decide(tree, documentID: documentID, local: local, remote: remote, resolver: resolver)
        return try apply(resolution, to: &tree, documentID: documentID, local: local, remote: remote)
    }

    /// What `resolver` decides for `local` against `remote` in `tree`; throws `.invalidArgument`
    /// unless they are two leaves, and what the resolver throws (`ConflictResolver`).
    func decide(_ tree: RevisionTree, documentID: String, local: RevisionID, remote: RevisionID,
                resolver: ConflictResolver) throws(StoreError) -> ConflictResolution {
        guard local != remote, tree.isLeaf(local), tree.isLeaf(remote),
              let l = tree.nodes[local], let r = tree.nodes[remote] else {
            throw .invalidArgument("\(local) and \(remote) are not two leaves of \(documentID)")
        }
        // Both deleted: the default keeps both tombstones without asking (Protocol/revisions.md,
        // "Storing a resolution").
        if l.isDeleted && r.isDeleted && resolver.isDefault { return .remote }
        let databaseID = context.databaseID
        let localDoc = l.isDeleted ? nil : try document(documentID, node: l, sequence: 0).from(databaseID)
        let remoteDoc = r.isDeleted ? nil : try document(documentID, node: r, sequence: 0).from(databaseID)
        let conflict = Conflict(documentID: documentID, local: localDoc, remote: remoteDoc,
                                localRevisionID: local, remoteRevisionID: remote)
        let (resolution, warning) = try resolver.resolution(of: conflict, in: databaseID)
        if let warning { Self.logger.warning("\(warning)", metadata: ["doc": "\(documentID)"]) }
        return resolution
    }

    /// Stores a decided resolution of two leaves of `tree` by adding revisions; returns the
    /// revision made for a new body, if any.
    @discardableResult
    func apply(_ resolution: ConflictResolution, to tree: inout RevisionTree, documentID: String,
               local: RevisionID, remote: RevisionID) throws(StoreError) -> RevisionID? {
        guard let l = tree.nodes[local], let r = tree.nodes[remote] else {
            throw .invalidArgument("\(local) and \(remote) are not two leaves of \(documentID)")
        }
        // A new revision continues the higher leaf, whichever side it is on, so the peer that
        // runs the resolver with the sides swapped makes the same one.
        let base = max(local, remote)
        let other = base == local ? remote : local
        switch resolution {
        case .remote:
            Self.close(local, in: &tree)
            return nil
        case .local:
            Self.close(remote, in: &tree)
            return nil
        case .merged(let props):
            var prepared = try prepareBody(props)
            let parentBody = tree.nodes[base]?.body
            try prepareAttachments(&prepared, generation: base.generation + 1,
                                   previous: parentBody.flatMap { try? JSONParser.parseObject($0) })
            let created = tree.addChild(of: base, deleted: prepared.deleted, canonicalBody: prepared.canonical)
            Self.close(other, in: &tree)
            return created
        case .delete where l.isDeleted || r.isDeleted:
            // A deletion already there wins as it is, whichever side it came from; the live
            // leaf is closed. (A new deletion of the live leaf — LiteCore's fast-forward for
            // the peer — would be a second deletion of the same conflict, made only where the
            // deletion was local; a re-creation continuing the first one then met it as a
            // deletion racing an edit, and lost: cluster harness seeds 107 and 108.)
            Self.close(local, in: &tree)
            Self.close(remote, in: &tree)
            return nil
        case .delete:
            let created = tree.addChild(of: base, deleted: true, canonicalBody: Self.emptyObject)
            Self.close(other, in: &tree)
            return created
        }
    }

    /// Closes a live leaf with a tombstone child (`RevisionTree.closedBody`): the branch lost a
    /// conflict. A tombstone, or a revision that is no longer a leaf, is left as it is.
    static func close(_ leaf: RevisionID, in tree: inout RevisionTree) {
        guard let n = tree.nodes[leaf], !n.isDeleted, tree.isLeaf(leaf) else { return }
        tree.addChild(of: leaf, deleted: true, canonicalBody: RevisionTree.closedBody)
    }

    /// Whether a new leaf `incoming` (already in `tree`) conflicts with the current revision
    /// `prev`, which is a leaf and not its ancestor. Every peer must answer the same for the
    /// same two branches, whichever it received first and whether it resolves (an active
    /// puller) or refuses (a passive peer):
    /// - two live leaves conflict (concurrent edits, or concurrent creations);
    /// - two tombstones do not: the document is deleted either way;
    /// - a closed branch (`RevisionTree.Node.isClosed`) conflicts with nothing;
    /// - a tombstone and a live leaf conflict only if their branches share a revision (an edit
    ///   racing a deletion: resolved, the deletion wins). Branches with no common revision are
    ///   two lives of the document: a re-creation after a deletion (Protocol/replication.md, "proposeChanges"), or the old life's
    ///   tombstone arriving late; the live one is current, and nothing is resolved.
    static func conflicts(prev: RevisionTree.Node, incoming: RevisionID, deleted: Bool, in tree: RevisionTree) -> Bool {
        // A closed branch (a loser some peer already resolved) contends with nothing.
        if prev.isClosed || tree.nodes[incoming]?.isClosed == true { return false }
        if prev.isDeleted && deleted { return false }
        if !prev.isDeleted && !deleted { return true }
        let ancestry = Set(tree.history(of: prev.revisionID))
        return tree.history(of: incoming).contains { ancestry.contains($0) }
    }

    /// Resolves every visible conflict of a document: repeatedly the current revision (local)
    /// against the highest other live leaf (remote). Deterministic for a given tree.
    func resolveAll(_ id: String, resolver: ConflictResolver) throws(StoreError) -> Int {
        guard let stored = try load(id) else { throw .notFound }
        var tree = stored.tree
        var rounds = 0
        while let cur = tree.current, let other = tree.conflicts.first {
            try resolve(&tree, documentID: id, local: cur.revisionID, remote: other, resolver: resolver)
            rounds += 1
        }
        if rounds > 0 { try store(id, key: stored.key, tree: &tree) }
        return rounds
    }

    func resolveOne(_ id: String, local: RevisionID, remote: RevisionID, resolver: ConflictResolver) throws(StoreError) -> RevisionID? {
        guard let stored = try load(id) else { throw .notFound }
        var tree = stored.tree
        let created = try resolve(&tree, documentID: id, local: local, remote: remote, resolver: resolver)
        try store(id, key: stored.key, tree: &tree)
        return created
    }
}
