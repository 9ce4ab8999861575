/// The on-disk form of a `RevisionTree` (the `docs.tree` column), documented in docs/store.md §5.
///
/// Layout: `u8 version(1)`, `varint count`, then per node in ascending revision-ID order:
/// `varint len, revID bytes, varint parentIndex+1 (0 = root), u8 flags (1 deleted, 2 body here,
/// 4 body is the document row's current body, 8 descendants pruned), [varint len, body]`, then `varint remoteCount`,
/// per remote `varint remote, varint nodeIndex`. The current body is not repeated in the tree:
/// it lives in `docs.body`, where SQLite's JSON functions can query it.
enum RevisionTreeCodec {
    static let version: UInt8 = 1

    static func encode(_ tree: RevisionTree, currentInRow current: RevisionID?) -> [UInt8] {
        // Most documents have one revision (and at most the remote it came from): no sorting
        // or index needed.
        if tree.nodes.count == 1, tree.remoteRevisions.count <= 1, let n = tree.nodes.values.first {
            let textCount = n.revisionID.textCount
            var out: [UInt8] = [version, 1]
            out.reserveCapacity(16 + textCount + (n.body?.count ?? 0))
            putVarint(UInt64(textCount), &out)
            n.revisionID.appendText(to: &out)
            out.append(0)                                    // a root
            var flags: UInt8 = n.isDeleted ? 1 : 0
            if n.revisionID == current { flags |= 4 } else if n.body != nil { flags |= 2 }
            if n.prunedBelow { flags |= 8 }
            out.append(flags)
            if flags & 2 != 0, let b = n.body {
                putVarint(UInt64(b.count), &out)
                out.append(contentsOf: b)
            }
            if let (remote, _) = tree.remoteRevisions.first {
                out.append(1)                                // one remote, at node 0
                putVarint(UInt64(remote), &out)
                out.append(0)
            } else {
                out.append(0)                                // no remotes
            }
            return out
        }
        let sorted = tree.nodes.keys.sorted()
        var index: [RevisionID: Int] = [:]
        index.reserveCapacity(sorted.count)
        for (i, r) in sorted.enumerated() { index[r] = i }
        var out: [UInt8] = [version]
        out.reserveCapacity(16 + sorted.count * 48)
        putVarint(UInt64(sorted.count), &out)
        for r in sorted {
            guard let n = tree.nodes[r] else { continue }
            putVarint(UInt64(r.textCount), &out)
            r.appendText(to: &out)
            putVarint(UInt64(n.parent.flatMap { index[$0] }.map { $0 + 1 } ?? 0), &out)
            var flags: UInt8 = n.isDeleted ? 1 : 0
            if r == current { flags |= 4 } else if n.body != nil { flags |= 2 }
            if n.prunedBelow { flags |= 8 }
            out.append(flags)
            if flags & 2 != 0, let b = n.body {
                putVarint(UInt64(b.count), &out)
                out.append(contentsOf: b)
            }
        }
        let remotes = tree.remoteRevisions.sorted { $0.key < $1.key }
        putVarint(UInt64(remotes.count), &out)
        for (remote, rev) in remotes {
            putVarint(UInt64(remote), &out)
            putVarint(UInt64(index[rev] ?? 0), &out)
        }
        return out
    }

    /// Decodes a stored tree; `currentBody` is the document row's body. Every length and index
    /// is checked: a damaged blob throws `.corruptRevisionTree`, never traps.
    static func decode(_ bytes: [UInt8], currentBody: [UInt8], documentID: String) throws(StoreError) -> RevisionTree {
        // The nodes as stored (most trees have one): their parents are indexes into them.
        let located = try locate(bytes, documentID: documentID)
        let raw = located.nodes
        var tree = RevisionTree()
        for n in raw {
            let parent = n.parentIndex == 0 ? nil : raw[n.parentIndex - 1].revisionID
            let body = n.flags & 2 != 0 ? Array(bytes[n.body]) : n.flags & 4 != 0 ? currentBody : nil
            tree.nodes[n.revisionID] = RevisionTree.Node(revisionID: n.revisionID, parent: parent, isDeleted: n.flags & 1 != 0,
                                                         body: body, prunedBelow: n.flags & 8 != 0)
        }
        located.forEachRemote { remote, index in tree.remoteRevisions[remote] = raw[index].revisionID }
        return tree
    }

    /// What sending `revision` needs, read from a stored tree without building it (`locate`);
    /// nil if the tree does not hold `revision` or its body.
    static func outgoing(_ bytes: [UInt8], currentBody: @autoclosure () -> [UInt8], revision: RevisionID, historyLimit: Int,
                         documentID: String) throws(StoreError) -> OutgoingRevision? {
        let tree = try locate(bytes, documentID: documentID)
        return tree.index(of: revision).flatMap { tree.outgoing(at: $0, currentBody: currentBody(), historyLimit: historyLimit) }
    }

    /// A stored tree's nodes located in place — no body copied, no table of them made — and
    /// checked as `decode` checks them: what a replication's sender reads for every revision it
    /// sends. `remote`: the remote whose pinned node to note (`LocatedTree.pinned`).
    static func locate(_ bytes: [UInt8], documentID: String, remote: Int? = nil) throws(StoreError) -> LocatedTree {
        var r = Reader(bytes: bytes)
        let bad = StoreError.corruptRevisionTree(documentID: documentID)
        guard r.byte() == version, let count = r.varint(), count <= UInt64(bytes.count) else { throw bad }
        var nodes: [LocatedNode] = []
        nodes.reserveCapacity(Int(count))
        for i in 0..<Int(count) {
            // A node that is its own parent would make a loop of the tree.
            guard let node = r.node(count: count), node.parentIndex != i + 1 else { throw bad }
            nodes.append(node)
        }
        var pinned: Int?
        let remotesStart = r.pos
        guard let rc = r.varint(), rc <= UInt64(bytes.count) else { throw bad }
        for _ in 0..<Int(rc) {
            guard let key = r.varint(), let idx = r.varint(), idx < count, key <= UInt64(Int.max) else { throw bad }
            if let remote, Int(key) == remote { pinned = Int(idx) }
        }
        guard r.atEnd else { throw bad }
        return LocatedTree(bytes: bytes, nodes: nodes, pinned: pinned, remotesStart: remotesStart)
    }

    /// A stored tree as `locate` found it.
    struct LocatedTree {
        let bytes: [UInt8]
        let nodes: [LocatedNode]
        /// The node pinned for the remote `locate` was asked about, if any.
        let pinned: Int?
        /// Where the (checked) list of remote pins begins.
        let remotesStart: Int

        /// Calls `body` with each remote pin (remote, node index), in stored order. `locate`
        /// checked them, so they are read again without checks rather than kept in an array
        /// that most readers never look at.
        func forEachRemote(_ body: (Int, Int) -> Void) {
            var r = Reader(bytes: bytes, pos: remotesStart)
            let count = r.varint() ?? 0
            for _ in 0..<count {
                guard let key = r.varint(), let index = r.varint() else { return }
                body(Int(key), Int(index))
            }
        }

        /// The node of `revision` (the last of that ID, the one `decode` keeps).
        func index(of revision: RevisionID) -> Int? {
            nodes.lastIndex { $0.revisionID == revision }
        }

        /// What sending node `index` needs, with at most `historyLimit` ancestors; nil if its body
        /// is not kept. `currentBody`: the document row's body, for the node flagged as holding it.
        func outgoing(at index: Int, currentBody: @autoclosure () -> [UInt8], historyLimit: Int) -> OutgoingRevision? {
            let node = nodes[index]
            let body: [UInt8]
            if node.flags & 4 != 0 { body = currentBody() } else if node.flags & 2 != 0 { body = Array(bytes[node.body]) } else { return nil }
            var ancestors: [RevisionID] = []
            var parent = node.parentIndex
            // Bounded by the node count too: a damaged blob could make the parents a loop.
            while parent != 0, ancestors.count < historyLimit, ancestors.count < nodes.count {
                ancestors.append(nodes[parent - 1].revisionID)
                parent = nodes[parent - 1].parentIndex
            }
            return OutgoingRevision(body: body, isDeleted: node.flags & 1 != 0, ancestors: ancestors)
        }
    }

    /// One node as stored: its parent as an index into the stored order (0 = a root), its body
    /// (if kept in the tree, flag 2) as a range of the blob, copied only by whoever needs it.
    struct LocatedNode {
        var revisionID: RevisionID
        var parentIndex: Int
        var flags: UInt8
        var body: Range<Int>
    }

    static func putVarint(_ v: UInt64, _ out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    struct Reader {
        let bytes: [UInt8]
        var pos = 0
        var atEnd: Bool { pos == bytes.count }

        mutating func byte() -> UInt8? {
            guard pos < bytes.count else { return nil }
            defer { pos += 1 }
            return bytes[pos]
        }

        mutating func varint() -> UInt64? {
            var v: UInt64 = 0
            var shift: UInt64 = 0
            while let b = byte() {
                guard shift < 64 else { return nil }
                v |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return v }
                shift += 7
            }
            return nil
        }

        /// The next node of a tree of `count` nodes, or nil if the bytes do not hold one.
        mutating func node(count: UInt64) -> LocatedNode? {
            // The revision ID is parsed where it lies, not copied out first.
            guard let len = varint(), let text = slice(Int(clamping: len)), let rev = RevisionID(utf8: text),
                  let p = varint(), p <= count, let flags = byte() else { return nil }
            var body = 0..<0
            if flags & 2 != 0 {
                guard let bl = varint(), let range = skip(Int(clamping: bl)) else { return nil }
                body = range
            }
            return LocatedNode(revisionID: rev, parentIndex: Int(p), flags: flags, body: body)
        }

        /// Steps over the next `n` bytes; returns where they lie.
        mutating func skip(_ n: Int) -> Range<Int>? {
            guard n >= 0, n <= bytes.count - pos else { return nil }
            defer { pos += n }
            return pos..<pos + n
        }

        /// The next `n` bytes without copying them (a revision ID to parse).
        mutating func slice(_ n: Int) -> ArraySlice<UInt8>? {
            skip(n).map { bytes[$0] }
        }
    }
}
