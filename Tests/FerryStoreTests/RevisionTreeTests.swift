@testable import FerryStore
import Testing

/// Revision-tree mechanics: history insertion, noop, winner, pruning, remote pins, codec.
@Suite struct RevisionTreeTests {
    @Test func insertsHistoryFromTheCommonAncestor() throws {
        var t = RevisionTree()
        #expect(try t.insert(history: [rev("2-bb"), rev("1-aa")], deleted: false, body: json(#"{"v":2}"#)) == .inserted(commonAncestor: nil))
        #expect(try t.insert(history: [rev("4-dd"), rev("3-cc"), rev("2-bb"), rev("1-aa")], deleted: false, body: json("{}"))
                == .inserted(commonAncestor: rev("2-bb")))
        #expect(t.nodes.count == 4)
        #expect(t.nodes[rev("3-cc")]?.parent == rev("2-bb"))
        #expect(t.nodes[rev("2-bb")]?.body == nil)   // no longer a leaf: body dropped
        #expect(try t.insert(history: [rev("3-cc"), rev("2-bb")], deleted: false, body: json("{}")) == .noop)
        #expect(t.current?.revisionID == rev("4-dd"))
    }

    @Test func liveLeavesWinOverDeletedOnesThenTheHigherRevision() throws {
        var t = RevisionTree()
        _ = try t.insert(history: [rev("1-aa")], deleted: false, body: json("{}"))
        _ = try t.insert(history: [rev("3-ff"), rev("2-ee"), rev("1-aa")], deleted: true, body: json("{}"))
        _ = try t.insert(history: [rev("2-bb"), rev("1-aa")], deleted: false, body: json("{}"))
        _ = try t.insert(history: [rev("2-cc"), rev("1-aa")], deleted: false, body: json("{}"))
        #expect(t.current?.revisionID == rev("2-cc"))
        #expect(t.conflicts == [rev("2-bb")])
        #expect(t.leaves.map(\.revisionID) == [rev("3-ff"), rev("2-cc"), rev("2-bb")])
    }

    /// The tombstone that closes a losing branch is never the revision a deletion of the same
    /// leaf makes, and a deletion beats it for current: otherwise a peer that closed leaf L and
    /// a peer where a deletion won over L hold the same revision ID meaning opposite things.
    @Test func aClosedBranchIsNeitherADeletionNorCurrentBesideOne() throws {
        var t = RevisionTree()
        _ = try t.insert(history: [rev("1-aa")], deleted: false, body: json(#"{"v":1}"#))
        let loser = t.addChild(of: rev("1-aa"), deleted: false, canonicalBody: json(#"{"v":"loser"}"#))
        let deletion = RevisionID.make(parent: loser, deleted: true, canonicalBody: json("{}"))
        let closed = t.addChild(of: loser, deleted: true, canonicalBody: RevisionTree.closedBody)
        #expect(closed != deletion)
        #expect(t.nodes[closed]?.isClosed == true)
        // A real deletion on another branch, of lower generation: still the current revision.
        let other = t.addChild(of: rev("1-aa"), deleted: true, canonicalBody: json("{}"))
        #expect(other.generation < closed.generation)
        #expect(t.current?.revisionID == other)
        #expect(t.nodes[other]?.isClosed == false)
    }

    @Test func prunesToTheDepthButKeepsRemotePins() throws {
        var t = RevisionTree()
        var parent: RevisionID?
        var all: [RevisionID] = []
        for i in 0..<60 {
            parent = t.addChild(of: parent, deleted: false, canonicalBody: json("{\"i\":\(i)}"))
            if let parent { all.append(parent) }
            if i == 3, let parent { t.setRemoteRevision(parent, remote: 1) }   // pinned while a leaf
        }
        let removed = t.prune(maxDepth: 50)
        #expect(removed == 9)   // generations 1–10 are 50+ away from the leaf, minus the pinned 4
        #expect(t.nodes[all[3]] != nil && t.nodes[all[3]]?.body != nil)
        #expect(t.nodes[all[10]]?.parent == nil)
        #expect(t.nodes[all[59]] != nil && t.nodes.count == 51)
        // The pinned revision lost its descendants: an inner node, not a second live branch.
        #expect(t.nodes[all[3]]?.prunedBelow == true)
        #expect(t.leaves.map(\.revisionID) == [all[59]] && t.conflicts.isEmpty && !t.isLeaf(all[3]))
        #expect(t.current?.revisionID == all[59])
        let blob = RevisionTreeCodec.encode(t, currentInRow: all[59])
        #expect(try RevisionTreeCodec.decode(blob, currentBody: t.nodes[all[59]]?.body ?? [], documentID: "d") == t)
        // Once the pin moves on, the old revision loses its body and the next prune removes it.
        t.setRemoteRevision(all[59], remote: 1)
        #expect(t.nodes[all[3]]?.body == nil)
        _ = t.addChild(of: all[59], deleted: false, canonicalBody: json(#"{"i":60}"#))
        t.prune(maxDepth: 50)
        #expect(t.nodes[all[3]] == nil && t.nodes.count == 50)
    }

    @Test func aStoreKeepsTreesPrunedAndRemotesLatestBodies() throws {
        var options = DatabaseOptions()
        options.maxRevisionTreeDepth = 5
        let (db, dir) = try freshDatabase(options)
        _ = dir
        try db.insert(ReplicatedRevision(documentID: "d", history: ["1-aa"], body: json(#"{"from":"peer"}"#)), fromRemote: "ws://peer/db")
        var doc = try #require(try db.document("d"))
        for i in 0..<10 {
            doc["i"] = .int(Int64(i))
            doc = try db.save(doc)
        }
        let tree = try #require(try db.revisionTree(of: "d"))
        #expect(tree.nodes.count == 6)
        #expect(tree.nodes[rev("1-aa")]?.body == json(#"{"from":"peer"}"#))
        #expect(tree.remoteRevisions.values.contains(rev("1-aa")))
        // Ten local edits past the depth do not turn the peer's old revision into a conflict.
        #expect(try db.conflictingRevisions(of: "d").isEmpty && db.conflictedDocumentIDs().isEmpty)
        #expect(tree.leaves.count == 1 && tree.current?.revisionID == doc.revisionID)
    }

    @Test func theCodecRoundTripsAndRejectsDamage() throws {
        var t = RevisionTree()
        _ = try t.insert(history: [rev("2-bb"), rev("1-aa")], deleted: false, body: json(#"{"b":1}"#))
        _ = try t.insert(history: [rev("2-cc"), rev("1-aa")], deleted: true, body: json(#"{}"#))
        t.setRemoteRevision(rev("2-cc"), remote: 7)
        let cur = try #require(t.current)
        let blob = RevisionTreeCodec.encode(t, currentInRow: cur.revisionID)
        let back = try RevisionTreeCodec.decode(blob, currentBody: cur.body ?? [], documentID: "d")
        #expect(back == t)
        for cut in [0, 1, 5, blob.count - 1] {
            #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
                try RevisionTreeCodec.decode(Array(blob.prefix(cut)), currentBody: [], documentID: "d")
            }
        }
        var garbage = blob
        garbage[2] = 0xFF
        #expect(throws: StoreError.self) { try RevisionTreeCodec.decode(garbage, currentBody: [], documentID: "d") }
    }

    /// Trees of one revision (read on their own path): with no remote, one, or several pinning
    /// it, live or deleted, with the body in the row or in the tree; cut short, with a node that
    /// names itself as its parent, or a remote pin past the one node, they are refused.
    @Test func oneRevisionTreesRoundTripAndRejectDamage() throws {
        for remotes in [[], [3], [1, 9, 400]] {
            for deleted in [false, true] {
                for currentInRow in [true, false] {
                    var t = RevisionTree()
                    let r = rev("1-0123456789abcdef0123456789abcdef01234567")
                    _ = try t.insert(history: [r], deleted: deleted, body: json(deleted ? "{}" : #"{"a":1}"#))
                    for remote in remotes { t.setRemoteRevision(r, remote: remote) }
                    let body = try #require(t.nodes[r]?.body)
                    let blob = RevisionTreeCodec.encode(t, currentInRow: currentInRow ? r : nil)
                    let back = try RevisionTreeCodec.decode(blob, currentBody: currentInRow ? body : [], documentID: "d")
                    #expect(back == t, "remotes \(remotes), deleted \(deleted), in row \(currentInRow)")
                    for cut in 0..<blob.count {
                        #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
                            try RevisionTreeCodec.decode(Array(blob.prefix(cut)), currentBody: body, documentID: "d")
                        }
                    }
                }
            }
        }
        // version 1, one node "1-ab", parent index 1 (itself), flags 0, no remotes.
        let selfParent: [UInt8] = [1, 1, 4] + Array("1-ab".utf8) + [1, 0, 0]
        #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
            try RevisionTreeCodec.decode(selfParent, currentBody: [], documentID: "d")
        }
        // The same refusal in a tree of two: "2-bb" names itself (index 2) as its parent.
        let selfParentOfTwo: [UInt8] = [1, 2, 4] + Array("1-aa".utf8) + [0, 0, 4] + Array("2-bb".utf8) + [2, 0, 0]
        #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
            try RevisionTreeCodec.decode(selfParentOfTwo, currentBody: [], documentID: "d")
        }
        // The same node as a root, pinned by remote 5 at node index 1 (there is only node 0).
        let pinPastEnd: [UInt8] = [1, 1, 4] + Array("1-ab".utf8) + [0, 0, 1, 5, 1]
        #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
            try RevisionTreeCodec.decode(pinPastEnd, currentBody: [], documentID: "d")
        }
        let valid: [UInt8] = [1, 1, 4] + Array("1-ab".utf8) + [0, 0, 1, 5, 0]
        #expect(try RevisionTreeCodec.decode(valid, currentBody: [], documentID: "d").remoteRevisions == [5: rev("1-ab")])
    }
}
