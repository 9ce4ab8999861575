import Testing
@testable import FerryStore

/// The sending side's read of a revision (`OutgoingRevision`) against the same read through the
/// decoded tree, which it must equal for every tree, revision and history limit.
@Suite struct OutgoingRevisionTests {
    /// A database keeping 3 revisions deep, with `documents` saved once each.
    static func shallowDatabase(documents: Int) throws -> (Database, TempDir, [Document]) {
        var options = DatabaseOptions()
        options.maxRevisionTreeDepth = 3
        let (db, dir) = try freshDatabase(options)
        let docs = try (0..<documents).map { i in try db.save(Document(id: "doc-\(i)", properties: ["i": .int(Int64(i))])) }
        return (db, dir, docs)
    }

    /// A random tree: branches, deletions, bodies dropped by pruning, remote pins.
    static func randomTree(_ g: inout SeededGenerator) throws -> RevisionTree {
        var t = RevisionTree()
        var made: [RevisionID] = []
        for i in 0..<Int.random(in: 1...30, using: &g) {
            let parent = made.isEmpty || Int.random(in: 0..<5, using: &g) == 0 ? nil : made.randomElement(using: &g)
            let deleted = Int.random(in: 0..<6, using: &g) == 0
            made.append(t.addChild(of: parent, deleted: deleted, canonicalBody: json(deleted ? "{}" : #"{"i":\#(i)}"#)))
            if Int.random(in: 0..<8, using: &g) == 0, let pinned = made.randomElement(using: &g) {
                t.setRemoteRevision(pinned, remote: Int.random(in: 1...4, using: &g))
            }
        }
        if Bool.random(using: &g) { t.prune(maxDepth: Int.random(in: 1...6, using: &g)) }
        return t
    }

    @Test func readsWhatTheDecodedTreeHolds() throws {
        var g = SeededGenerator(seed: 36)
        for round in 0..<200 {
            let t = try Self.randomTree(&g)
            let current = try #require(t.current)
            let inRow = Bool.random(using: &g) ? current.revisionID : nil
            let rowBody = inRow == nil ? [] : current.body ?? []
            let blob = RevisionTreeCodec.encode(t, currentInRow: inRow)
            let decoded = try RevisionTreeCodec.decode(blob, currentBody: rowBody, documentID: "d")
            let asked = Array(t.nodes.keys) + [rev("9-00"), rev("1-ffff")]
            for revision in asked {
                for limit in [0, 1, 3, 50] {
                    let read = try RevisionTreeCodec.outgoing(blob, currentBody: rowBody, revision: revision, historyLimit: limit,
                                                              documentID: "d")
                    #expect(read == decoded.outgoing(revision, historyLimit: limit), "round \(round), \(revision), limit \(limit)")
                }
            }
            // The pin of each remote (and of none) is found where `decode` puts it.
            for remote in 0...5 {
                let located = try RevisionTreeCodec.locate(blob, documentID: "d", remote: remote)
                #expect(located.pinned.map { located.nodes[$0].revisionID } == decoded.remoteRevisions[remote], "round \(round)")
            }
            // Every cut of the blob is refused, as `decode` refuses it (every tenth tree: many cuts).
            for cut in 0..<blob.count where round % 10 == 0 {
                #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
                    try RevisionTreeCodec.outgoing(Array(blob.prefix(cut)), currentBody: rowBody, revision: current.revisionID,
                                                   historyLimit: 50, documentID: "d")
                }
            }
        }
    }

    @Test func refusesWhatDecodeRefuses() {
        // A node naming itself as its parent, a remote pin past the last node, trailing bytes.
        let damaged: [[UInt8]] = [
            [1, 1, 4] + Array("1-ab".utf8) + [1, 0, 0],
            [1, 2, 4] + Array("1-aa".utf8) + [0, 0, 4] + Array("2-bb".utf8) + [2, 0, 0],
            [1, 1, 4] + Array("1-ab".utf8) + [0, 0, 1, 5, 1],
            [1, 1, 4] + Array("1-ab".utf8) + [0, 0, 0, 7],   // a byte past the end
        ]
        for blob in damaged {
            #expect(throws: StoreError.corruptRevisionTree(documentID: "d")) {
                try RevisionTreeCodec.outgoing(blob, currentBody: [], revision: rev("1-ab"), historyLimit: 50, documentID: "d")
            }
        }
    }

    /// A page of the change feed read in one scan, with documents edited after they were listed
    /// (their listed revision superseded, their row past the range), deleted, in conflict and
    /// with old bodies pruned away; and a sparse batch, read through the trees.
    @Test func aDatabaseReadsABatchAsItsTreesSay() throws {
        let (db, dir, saved) = try Self.shallowDatabase(documents: 120)
        _ = dir
        var docs = saved
        for i in stride(from: 0, to: 120, by: 7) {
            for k in 0..<4 {
                docs[i]["k"] = .int(Int64(k))
                docs[i] = try db.save(docs[i])
            }
        }
        for i in stride(from: 3, to: 120, by: 11) { _ = try db.delete(docs[i]) }
        try db.insert(ReplicatedRevision(documentID: "doc-5", history: ["2-ee", "1-aa"], body: json(#"{"peer":true}"#)))
        let listed = try db.changes(since: 0, limit: 1000)
        // Edited after the listing: the listed revision is kept (depth 3) or pruned away.
        for i in stride(from: 2, to: 120, by: 13) {
            guard var d = try db.document("doc-\(i)") else { continue }   // deleted above
            for k in 0..<Int(i % 5) + 1 {
                d["after"] = .int(Int64(k))
                d = try db.save(d)
            }
        }
        for batch in [listed, listed.enumerated().filter { $0.offset % 9 == 0 }.map(\.element)] {
            for limit in [0, 2, 50] {
                let trees = try db.revisionTrees(of: batch.map(\.documentID))
                let expected = batch.map { trees[$0.documentID]?.outgoing($0.revisionID, historyLimit: limit) }
                let read = try db.outgoingRevisions(of: batch, historyLimit: limit)
                #expect(read == expected, "batch of \(batch.count), limit \(limit)")
            }
        }
        #expect(try db.outgoingRevisions(of: [], historyLimit: 50).isEmpty)
        // Some listed revisions are gone (norev), the rest are read.
        let read = try db.outgoingRevisions(of: listed, historyLimit: 50)
        #expect(read.contains { $0 == nil } && read.contains { $0 != nil })
    }

    /// An active push's page (`outgoingPage`): the changes as the feed lists them, each with its
    /// revision and its remote parent as the trees say — pins in the trees and acknowledgements
    /// not yet moved there, of this remote and of another, one naming a revision pruned away —
    /// and the whole trees of the documents with other leaves.
    @Test func aPushPageReadsWhatTheTreesSay() throws {
        let (db, dir, saved) = try Self.shallowDatabase(documents: 60)
        _ = dir
        var docs = saved
        let firstOf5 = try #require(docs[5].revisionID)
        try db.setRemoteRevisions(docs.enumerated().filter { $0.offset % 2 == 0 }.map { ($0.element.id, try #require($0.element.revisionID)) },
                                  remote: "peer")
        try db.setRemoteRevisions(docs.enumerated().filter { $0.offset % 3 == 0 }.map { ($0.element.id, try #require($0.element.revisionID)) },
                                  remote: "other")
        // Written again: the acknowledgements move into the trees; some are then pruned away.
        for i in stride(from: 0, to: 60, by: 5) {
            for k in 0..<(i % 10 == 0 ? 1 : 5) {
                docs[i]["k"] = .int(Int64(k))
                docs[i] = try db.save(docs[i])
            }
        }
        // Acknowledged after that: rows beside the trees, one of a revision the tree no longer holds.
        try db.setRemoteRevisions([(docs[10].id, try #require(docs[10].revisionID)), (docs[4].id, try #require(docs[4].revisionID)),
                                   (docs[5].id, firstOf5)], remote: "peer")
        for i in stride(from: 7, to: 60, by: 11) { _ = try db.delete(docs[i]) }
        try db.insert(ReplicatedRevision(documentID: "doc-9", history: ["2-ee", "1-aa"], body: json(#"{"peer":true}"#)))
        try db.insert(ReplicatedRevision(documentID: "doc-18", history: ["3-ee", "2-dd", "1-aa"], body: json(#"{"peer":true}"#)))

        for remote in ["peer", "other", "unknown"] {
            for (since, limit) in [(Int64(0), 1000), (Int64(0), 7), (Int64(30), 20)] {
                let page = try db.outgoingPage(since: since, limit: limit, remote: remote, historyLimit: 3)
                let changes = try db.changes(since: since, limit: limit)
                let trees = try db.revisionTrees(of: changes.map(\.documentID))
                let parents = try db.remoteRevisions(in: trees, remote: remote)
                #expect(page.entries.map(\.change) == changes, "\(remote) \(since) \(limit)")
                for e in page.entries {
                    let tree = try #require(trees[e.change.documentID])
                    #expect(e.revision == tree.outgoing(e.change.revisionID, historyLimit: 3), "\(e.change.documentID)")
                    #expect(e.remoteRevision == parents[e.change.documentID], "\(remote) \(e.change.documentID)")
                }
                let flagged = changes.filter(\.hasOtherLeaves).map(\.documentID)
                #expect(page.otherLeafTrees == trees.filter { flagged.contains($0.key) })
            }
        }
        let all = try db.outgoingPage(since: 0, limit: 1000, remote: "peer", historyLimit: 3)
        #expect(all.entries.first { $0.change.documentID == "doc-5" }?.remoteRevision == nil)
        #expect(all.entries.contains { $0.remoteRevision != nil } && all.entries.contains { $0.remoteRevision == nil })
        #expect(all.otherLeafTrees.keys.sorted() == ["doc-18", "doc-9"])
        #expect(all.purgeCount == 0)
        try db.purge("doc-1")
        #expect(try db.outgoingPage(since: 0, limit: 1, remote: "peer", historyLimit: 3).purgeCount == 1)
    }
}
