import FerryStore

/// Answers the two "do you want these?" messages against the local database: `changes`
/// (Protocol/replication.md, "changes": send me this, I have these ancestors) and `proposeChanges` (Protocol/replication.md, "proposeChanges": the
/// conflict check a passive peer makes before accepting a push).
enum RevFinder {
    static func answer(_ entries: [ReplicationMessages.ChangeEntry],
                       database: Database) throws(StoreError) -> [ReplicationMessages.ChangeAnswer] {
        var out: [ReplicationMessages.ChangeAnswer] = []
        out.reserveCapacity(entries.count)
        let trees = try database.revisionTrees(of: entries.map(\.documentID))
        for e in entries {
            guard !e.isAccessLoss, let rev = try? RevisionID(e.revisionID) else { out.append(.skip); continue }
            guard let tree = trees[e.documentID] else {
                out.append(.send(knownRevisions: []))
                continue
            }
            if tree.nodes[rev] != nil { out.append(.skip); continue }
            // The sender cuts the history at the first of these it finds: the leaves (current
            // first) below the offered generation are where the new revision can attach.
            var known: [RevisionID] = []
            if let cur = tree.current?.revisionID, cur.generation < rev.generation { known.append(cur) }
            for leaf in tree.leaves where leaf.revisionID.generation < rev.generation && !known.contains(leaf.revisionID) {
                known.append(leaf.revisionID)
            }
            out.append(.send(knownRevisions: known.prefix(ReplicatorTuning.maxKnownRevisions).map(\.description)))
        }
        return out
    }

    static func answer(_ proposals: [ReplicationMessages.ProposedChange],
                       database: Database) throws(StoreError) -> [ReplicationMessages.ProposalStatus] {
        var out: [ReplicationMessages.ProposalStatus] = []
        out.reserveCapacity(proposals.count)
        let trees = try database.revisionTrees(of: proposals.map(\.documentID))
        for p in proposals {
            guard let tree = trees[p.documentID], let current = tree.current else {
                out.append(.send)
                continue
            }
            let cur = current.revisionID.description
            if let rev = try? RevisionID(p.revisionID), tree.nodes[rev] != nil { out.append(.alreadyHave) }
            else if let parent = p.remoteParent, parent == cur { out.append(.send) }
            // A deleted current revision: a re-creation, another life's tombstone, or a closed
            // branch's successor may all be fine — the insert judges with the history.
            else if current.isDeleted { out.append(.send) }
            else { out.append(.conflict(current: cur)) }
        }
        return out
    }
}
