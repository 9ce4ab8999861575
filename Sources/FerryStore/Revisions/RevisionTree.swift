/// The revision tree of one document: every known revision with its parent, which ones are
/// deleted, and the bodies that are still needed. A pure value; the store loads it, changes it
/// and writes it back inside one transaction.
///
/// Promises (docs/store.md §3):
/// - The current revision is a function of the tree alone: among leaves, live beats deleted,
///   deleted beats closed (a conflict's losing branch, `Node.isClosed`), then the higher
///   `RevisionID` (generation, then digest bytes). Every peer holding the same revisions
///   computes the same current revision, whatever order they arrived in.
/// - The conflict set is the live leaves other than the current revision, highest first.
/// - Bodies are kept for leaves and for each remote's latest revision only; a node that gets a
///   child loses its body (unless a remote pins it) and its deleted flag, which nothing reads.
public struct RevisionTree: Sendable, Equatable {
    /// One revision in the tree.
    public struct Node: Sendable, Equatable {
        /// This revision's ID.
        public let revisionID: RevisionID
        /// Its parent, or nil for a root (generation 1, or the oldest known after pruning or a
        /// history that stopped short).
        public internal(set) var parent: RevisionID?
        /// Whether this revision is a tombstone (meaningful for leaves).
        public internal(set) var isDeleted: Bool
        /// The JSON body, where kept (leaves and remote-pinned revisions).
        public internal(set) var body: [UInt8]?
        /// Its descendants were pruned while a remote pinned it (it is older than the tree's
        /// depth): an inner revision whose children are gone, never a leaf — without this it
        /// would look like a second live branch, a conflict nobody made.
        public internal(set) var prunedBelow = false

        /// Whether this is the tombstone that closed a conflict's losing branch (`closedBody`):
        /// not a deletion of the document. A resolution that deleted the document and one that
        /// closed a loser must never be the same revision: a peer that took the first for the
        /// second would keep the document live while the others have it deleted.
        public var isClosed: Bool { isDeleted && body == RevisionTree.closedBody }
    }

    /// The body of the tombstone that closes a conflict's losing branch (its own digest, apart
    /// from a deletion's `{}`).
    public static let closedBody: [UInt8] = Array(#"{"ferry:closed":true}"#.utf8)

    /// All nodes by revision ID.
    public internal(set) var nodes: [RevisionID: Node] = [:]
    /// The latest revision known to be on each remote (by remote number); never pruned, body kept.
    public internal(set) var remoteRevisions: [Int: RevisionID] = [:]

    /// An empty tree (a document that does not exist yet).
    public init() {}

    /// Whether the tree has no revisions.
    public var isEmpty: Bool { nodes.isEmpty }

    /// Revision IDs that are some node's parent.
    var parentIDs: Set<RevisionID> {
        var s = Set<RevisionID>()
        s.reserveCapacity(nodes.count)
        for n in nodes.values { if let p = n.parent { s.insert(p) } }
        return s
    }

    /// The leaves (revisions without children), highest `RevisionID` first.
    public var leaves: [Node] {
        unsortedLeaves.sorted { $0.revisionID > $1.revisionID }
    }

    /// The leaves in no particular order (cheap: most trees have one or two nodes).
    var unsortedLeaves: [Node] {
        if nodes.count <= 1 { return nodes.values.filter { !$0.prunedBelow } }
        let parents = parentIDs
        return nodes.values.filter { !parents.contains($0.revisionID) && !$0.prunedBelow }
    }

    /// Whether `rev` is in the tree and has no children (nor had them pruned).
    public func isLeaf(_ rev: RevisionID) -> Bool {
        guard let n = nodes[rev], !n.prunedBelow else { return false }
        return !nodes.values.contains { $0.parent == rev }
    }

    /// The winner among `leaves`: live before deleted before closed, then the higher revision ID.
    static func winner(of leaves: [Node]) -> Node? {
        func rank(_ n: Node) -> Int { n.isDeleted ? (n.isClosed ? 0 : 1) : 2 }
        var best: Node?
        for leaf in leaves {
            guard let b = best else { best = leaf; continue }
            let (rb, rl) = (rank(b), rank(leaf))
            if rl > rb || (rl == rb && leaf.revisionID > b.revisionID) { best = leaf }
        }
        return best
    }

    /// The winning revision: live leaves before deleted ones before closed ones, then the
    /// highest revision ID.
    public var current: Node? { Self.winner(of: unsortedLeaves) }

    /// The live leaves other than the current revision, highest first.
    public var conflicts: [RevisionID] {
        Self.conflicts(among: unsortedLeaves)
    }

    static func conflicts(among leaves: [Node]) -> [RevisionID] {
        guard leaves.count > 1, let cur = winner(of: leaves) else { return [] }
        return leaves.filter { !$0.isDeleted && $0.revisionID != cur.revisionID }.map(\.revisionID).sorted(by: >)
    }

    /// Whether `ancestor` is `rev` or one of its ancestors.
    public func isAncestor(_ ancestor: RevisionID, of rev: RevisionID) -> Bool {
        var cursor: RevisionID? = rev
        var steps = 0
        while let c = cursor, steps <= nodes.count {
            if c == ancestor { return true }
            cursor = nodes[c]?.parent
            steps += 1
        }
        return false
    }

    /// `rev` and its ancestors, newest first (the history sent with a revision).
    public func history(of rev: RevisionID, limit: Int = .max) -> [RevisionID] {
        var out: [RevisionID] = []
        var cursor: RevisionID? = rev
        while let c = cursor, let n = nodes[c], out.count < limit {
            out.append(c)
            cursor = n.parent
        }
        return out
    }

    /// Adds a child of `parent` (nil: a root) computed with the digest formula, and returns its
    /// ID. Idempotent: if that revision already exists nothing changes. The caller checks that
    /// `parent` is a leaf where that matters.
    @discardableResult
    mutating func addChild(of parent: RevisionID?, deleted: Bool, canonicalBody: [UInt8]) -> RevisionID {
        let rev = RevisionID.make(parent: parent, deleted: deleted, canonicalBody: canonicalBody)
        if nodes[rev] == nil {
            nodes[rev] = Node(revisionID: rev, parent: parent, isDeleted: deleted, body: canonicalBody)
            if let parent { becameParent(parent) }
        }
        return rev
    }

    /// What inserting a replicated revision did.
    public enum HistoryInsert: Sendable, Equatable {
        /// The revision was already in the tree.
        case noop
        /// Inserted; `commonAncestor` is the newest revision of the history already present
        /// (nil when the history shares nothing with the tree).
        case inserted(commonAncestor: RevisionID?)
    }

    /// Inserts a replicated revision with its history (`history[0]` is the revision itself,
    /// then its parent, grandparent...). Walks back to the first revision already present (the
    /// common ancestor) and adds the missing ones oldest first; only the newest gets `body` and
    /// `deleted`. Throws `.brokenHistory` unless each generation is exactly one less than the
    /// previous; nothing changes then.
    mutating func insert(history: [RevisionID], deleted: Bool, body: [UInt8]) throws(StoreError) -> HistoryInsert {
        guard let rev = history.first else { throw .brokenHistory(reason: "empty history") }
        for i in 1..<max(1, history.count) where history[i].generation != history[i - 1].generation - 1 {
            throw .brokenHistory(reason: "\(history[i]) follows \(history[i - 1])")
        }
        if nodes[rev] != nil { return .noop }
        var ancestorIndex = history.count
        for (i, r) in history.enumerated() where nodes[r] != nil {
            ancestorIndex = i
            break
        }
        for j in stride(from: ancestorIndex - 1, through: 0, by: -1) {
            let parent = j + 1 < history.count ? history[j + 1] : nil
            let isNewest = j == 0
            nodes[history[j]] = Node(revisionID: history[j], parent: parent,
                                     isDeleted: isNewest ? deleted : false, body: isNewest ? body : nil)
            if let parent { becameParent(parent) }
        }
        return .inserted(commonAncestor: ancestorIndex < history.count ? history[ancestorIndex] : nil)
    }

    /// A node that got a child keeps no body (unless a remote pins it) and no deleted flag.
    mutating func becameParent(_ rev: RevisionID) {
        guard var n = nodes[rev] else { return }
        if !remoteRevisions.values.contains(rev) { n.body = nil }
        n.isDeleted = false
        nodes[rev] = n
    }

    /// Records `rev` as the latest revision `remote` has; it keeps its body and is never pruned.
    mutating func setRemoteRevision(_ rev: RevisionID, remote: Int) {
        let old = remoteRevisions[remote]
        remoteRevisions[remote] = rev
        if let old, old != rev, !remoteRevisions.values.contains(old), !isLeaf(old), var n = nodes[old] {
            n.body = nil
            nodes[old] = n
        }
    }

    /// Removes every node whose distance to its nearest descendant leaf is `maxDepth` or more,
    /// except remote-pinned revisions. Children of a removed node become roots. Returns how many
    /// nodes were removed.
    @discardableResult
    mutating func prune(maxDepth: Int) -> Int {
        guard maxDepth > 0, nodes.count > maxDepth else { return 0 }
        // Walk up from every leaf recording the smallest distance at which each node is reached.
        var distance: [RevisionID: Int] = [:]
        distance.reserveCapacity(nodes.count)
        for leaf in leaves {
            var cursor: RevisionID? = leaf.revisionID
            var d = 0
            while let c = cursor {
                if let seen = distance[c], seen <= d { break }
                distance[c] = d
                cursor = nodes[c]?.parent
                d += 1
            }
        }
        let pinned = Set(remoteRevisions.values)
        // A node no leaf reaches is an old pinned revision whose branch was pruned before (its
        // pin has moved on, or it would be kept): it goes too.
        let doomed = nodes.keys.filter { (distance[$0] ?? maxDepth) >= maxDepth && !pinned.contains($0) }
        guard !doomed.isEmpty else { return 0 }
        let doomedSet = Set(doomed)
        for r in doomed {
            // A kept (pinned) parent of a removed node has lost descendants: never a leaf.
            if let p = nodes[r]?.parent, !doomedSet.contains(p), var pn = nodes[p] {
                pn.prunedBelow = true
                nodes[p] = pn
            }
        }
        for r in doomed { nodes[r] = nil }
        for (k, var n) in nodes {
            if let p = n.parent, doomedSet.contains(p) {
                n.parent = nil
                nodes[k] = n
            }
        }
        return doomed.count
    }
}
