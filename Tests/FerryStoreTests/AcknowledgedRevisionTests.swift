@testable import FerryStore
import Testing

/// `setRemoteRevisions` (what a pusher records when its peer acknowledges revisions) keeps the
/// pins in `remote_revs` rather than in the trees: readers and later writes must see the same
/// pins as if they had been written into the trees (docs/store.md §5).
@Suite struct AcknowledgedRevisionTests {
    func rows(_ dir: TempDir) throws -> Int {
        Int(try rawScalar(dir.path("test.ferry"), "SELECT count(*) FROM remote_revs") ?? "") ?? -1
    }

    func save(_ db: Database, _ doc: Document) throws -> (Document, RevisionID) {
        let saved = try db.save(doc)
        return (saved, try #require(saved.revisionID))
    }

    @Test func anAcknowledgedRevisionIsPinnedForReadersAndLaterWrites() throws {
        var options = DatabaseOptions()
        options.maxRevisionTreeDepth = 3
        let (db, dir) = try freshDatabase(options)
        var (doc, first) = try save(db, Document(id: "doc", properties: ["v": 1]))
        try db.setRemoteRevisions([(documentID: "doc", revisionID: first)], remote: "peer")
        // Recorded beside the row, yet every reader sees the pin.
        #expect(try rows(dir) == 1)
        #expect(try db.revisionTree(of: "doc")?.remoteRevisions.values.contains(first) == true)
        #expect(try db.remoteRevisions(of: ["doc"], remote: "peer") == ["doc": first])
        #expect(try db.remoteRevisions(of: ["doc"], remote: "other").isEmpty)

        // Later edits: the pinned revision keeps its body and is never pruned, however deep.
        var latest = first
        for i in 2...8 {
            doc.properties["v"] = .int(Int64(i))
            (doc, latest) = try save(db, doc)
        }
        let tree = try #require(try db.revisionTree(of: "doc"))
        #expect(tree.nodes[first]?.body != nil)
        #expect(tree.remoteRevisions.values.contains(first))
        #expect(try db.revision(first, of: "doc")?["v"] == 1)
        #expect(try db.conflictingRevisions(of: "doc").isEmpty && tree.leaves.count == 1)
        // The first write moved the pin into the tree and deleted the row.
        #expect(try rows(dir) == 0)

        // A newer acknowledgement moves the pin: the old revision loses its body and is pruned.
        let acknowledged = latest
        try db.setRemoteRevisions([(documentID: "doc", revisionID: acknowledged)], remote: "peer")
        #expect(try db.remoteRevisions(of: ["doc"], remote: "peer") == ["doc": acknowledged])
        doc.properties["v"] = 9
        (doc, latest) = try save(db, doc)
        let after = try #require(try db.revisionTree(of: "doc"))
        #expect(after.nodes[first] == nil)
        #expect(try db.revision(first, of: "doc") == nil)
        #expect(Array(after.remoteRevisions.values) == [acknowledged])
        #expect(after.nodes[acknowledged]?.body != nil)
        #expect(try rows(dir) == 0)
    }

    /// A pusher reads a batch's trees by scanning its sequence range with the pins joined in
    /// (`revisionTrees(of: [Change])`); it must give what lookups by ID give, including for a
    /// document changed again since the batch was read and for rows outside the batch.
    @Test func aBatchReadBySequenceMatchesLookupsByID() throws {
        let (db, dir) = try freshDatabase()
        defer { withExtendedLifetime(dir) {} }
        var revs: [String: RevisionID] = [:]
        for id in ["a", "b", "c", "d", "e"] { revs[id] = try save(db, Document(id: id, properties: ["id": .string(id)])).1 }
        try db.setRemoteRevisions([(documentID: "b", revisionID: try #require(revs["b"])),
                                   (documentID: "d", revisionID: try #require(revs["d"]))], remote: "peer")
        try db.setRemoteRevisions([(documentID: "b", revisionID: try #require(revs["b"]))], remote: "other")
        let all = try db.changes(since: 0)
        let batch = all.filter { $0.documentID != "c" }   // "c" lies in the range but is not asked for
        var changed = try #require(try db.document("d"))
        changed.properties["again"] = true
        let newD = try #require(try db.save(changed).revisionID)

        let scanned = try db.revisionTrees(of: batch)
        let looked = try db.revisionTrees(of: batch.map(\.documentID))
        #expect(Set(scanned.keys) == ["a", "b", "d", "e"])
        for (id, tree) in looked {
            let other = try #require(scanned[id])
            #expect(other.nodes.keys.sorted() == tree.nodes.keys.sorted(), "\(id)")
            #expect(other.remoteRevisions == tree.remoteRevisions, "\(id)")
            for (rev, node) in tree.nodes { #expect(other.nodes[rev]?.body == node.body, "\(id) \(rev)") }
        }
        #expect(scanned["b"]?.remoteRevisions.count == 2)
        #expect(scanned["d"]?.nodes[newD] != nil)
        #expect(try db.remoteRevisions(in: scanned, remote: "peer") == ["b": try #require(revs["b"]), "d": try #require(revs["d"])])

        // Several IDs are read in one statement (a JSON array of IDs), one document by its own
        // lookup (`revisionTree(of:)`): the same trees, whatever the IDs hold, repeated or
        // missing ones included.
        let odd = "q\"uo\\te ü \u{1F600}/[1]"
        _ = try save(db, Document(id: odd, properties: ["odd": true]))
        let ids = ["a", "b", "b", "missing", "d", "e", odd]
        let together = try db.revisionTrees(of: ids)
        #expect(Set(together.keys) == ["a", "b", "d", "e", odd])
        for id in Set(ids) {
            let alone = try db.revisionTree(of: id)
            #expect(alone?.nodes.keys.sorted() == together[id]?.nodes.keys.sorted(), "\(id)")
            #expect(alone?.remoteRevisions == together[id]?.remoteRevisions, "\(id)")
            #expect(alone?.current?.body == together[id]?.current?.body, "\(id)")
        }
    }

    /// A proposing pusher reads each page of changes with their trees in one scan
    /// (`changesWithTrees`): the same changes and trees as the two separate reads, pins of
    /// several remotes joined in, the limit counting documents rather than joined rows.
    @Test func changesWithTreesMatchesTheSeparateReads() throws {
        let (db, dir) = try freshDatabase()
        defer { withExtendedLifetime(dir) {} }
        var acks: [(documentID: String, revisionID: RevisionID)] = []
        for i in 0..<7 {
            let (_, r) = try save(db, Document(id: "d\(i)", properties: ["i": .int(Int64(i))]))
            acks.append((documentID: "d\(i)", revisionID: r))
        }
        try db.setRemoteRevisions(acks, remote: "one")
        try db.setRemoteRevisions(Array(acks.prefix(4)), remote: "two")
        for (since, limit) in [(Int64(0), 3), (Int64(2), 10), (Int64(7), 5)] {
            let together = try db.changesWithTrees(since: since, limit: limit)
            let changes = try db.changes(since: since, limit: limit)
            #expect(together.changes == changes)
            #expect(together.trees == (try db.revisionTrees(of: changes.map(\.documentID))))
        }
        #expect(try db.changesWithTrees(since: 0, limit: 3).trees["d1"]?.remoteRevisions.count == 2)
    }

    /// A pusher's unchecked record goes in statements of 32 rows, the rest one by one: every
    /// row lands, in order (a document acknowledged twice in one call keeps the later
    /// revision), exactly as one row per statement would.
    @Test func aBatchOfAcknowledgementsIsRecordedWholeAndInOrder() throws {
        let (db, dir) = try freshDatabase()
        var acks: [(documentID: String, revisionID: RevisionID)] = []
        var expected: [String: RevisionID] = [:]
        for i in 0..<75 {
            var (doc, r) = try save(db, Document(id: "d\(i)", properties: ["i": .int(Int64(i))]))
            acks.append((documentID: "d\(i)", revisionID: r))
            expected["d\(i)"] = r
            if i % 10 == 3 {
                // A second revision of the same document, acknowledged later in the same call.
                doc.properties["edited"] = true
                (_, r) = try save(db, doc)
                acks.append((documentID: "d\(i)", revisionID: r))
                expected["d\(i)"] = r
            }
        }
        #expect(acks.count == 83 && acks.count / AcknowledgedRevisions.rowsPerStatement == 2)
        try db.setRemoteRevisions(acks, remote: "peer", purgeCountBefore: try db.purgeCount())
        #expect(try rows(dir) == 75)
        #expect(try db.remoteRevisions(of: Array(expected.keys), remote: "peer") == expected)
    }

    @Test func revisionsNotInTheTreeAndPurgedDocumentsLeaveNoPin() throws {
        let (db, dir) = try freshDatabase()
        let (_, first) = try save(db, Document(id: "doc", properties: ["v": 1]))
        try db.setRemoteRevisions([(documentID: "doc", revisionID: rev("7-abcdef")),
                                   (documentID: "missing", revisionID: rev("1-abcdef"))], remote: "peer")
        #expect(try db.remoteRevisions(of: ["doc", "missing"], remote: "peer").isEmpty)
        #expect(try rows(dir) == 1)   // "missing" has no document: no row
        try db.setRemoteRevisions([(documentID: "doc", revisionID: first)], remote: "peer")
        #expect(try rows(dir) == 1)
        try db.purge("doc")
        #expect(try rows(dir) == 0)
        try db.setRemoteRevisions([(documentID: "doc", revisionID: first)], remote: "peer")   // acknowledged after the purge
        #expect(try rows(dir) == 0)
        // Re-created with the same body, hence the same revision ID: not pinned by the old row.
        let (_, again) = try save(db, Document(id: "doc", properties: ["v": 1]))
        #expect(again == first)
        #expect(try db.remoteRevisions(of: ["doc"], remote: "peer").isEmpty)
    }

    /// A pusher passes the purge count it read before its trees: unchanged, rows are written
    /// without looking the documents up; a purge in between (this process or another) brings
    /// the check back, so an acknowledgement of a purged document still leaves no row.
    @Test func anAcknowledgementAfterAPurgeLeavesNoRowEvenWithTheFastPath() throws {
        let (db, dir) = try freshDatabase()
        let (_, a) = try save(db, Document(id: "a", properties: ["v": 1]))
        let (_, b) = try save(db, Document(id: "b", properties: ["v": 1]))
        let before = try db.purgeCount()
        #expect(before == 0)
        try db.setRemoteRevisions([(documentID: "a", revisionID: a)], remote: "peer", purgeCountBefore: before)
        #expect(try rows(dir) == 1)
        try db.purge("b")
        #expect(try db.purgeCount() == 1)
        try db.setRemoteRevisions([(documentID: "b", revisionID: b)], remote: "peer", purgeCountBefore: before)
        #expect(try rows(dir) == 1)
        #expect(try rawScalar(dir.path("test.ferry"), "SELECT count(*) FROM remote_revs WHERE doc_id = 'b'") == "0")
        // A deletion by another process (here the SQLite C API on the file) counts too: the
        // counter is kept by a trigger in the file.
        try rawExec(dir.path("test.ferry"), "DELETE FROM docs WHERE doc_id = 'a'")
        #expect(try db.purgeCount() == 2)
    }

    /// Revisions inserted as new documents (`insertIfNew`, the first-try path of a bulk pull)
    /// carry the same pin of the remote they came from as the general path gives.
    @Test func newDocumentsFromARemoteArePinnedLikeUpdates() throws {
        let (db, dir) = try freshDatabase()
        defer { withExtendedLifetime(dir) {} }
        let revs = ["1-aa", "1-bb", "1-cc"].map { rev($0) }
        let outcomes = try db.insert(zip(["x", "y", "z"], revs).map {
            ReplicatedRevision(documentID: $0.0, history: [$0.1.description], body: json(#"{"v":1}"#))
        }, fromRemote: "peer")
        #expect(try outcomes.map { try $0.get().status } == [.inserted, .inserted, .inserted])
        #expect(try db.remoteRevisions(of: ["x", "y", "z"], remote: "peer") == ["x": revs[0], "y": revs[1], "z": revs[2]])
        // An update through the general path keeps the pinned parent's body, as for any pin.
        try db.insert(ReplicatedRevision(documentID: "x", history: ["2-dd", "1-aa"], body: json(#"{"v":2}"#)))
        #expect(try db.revisionTree(of: "x")?.nodes[revs[0]]?.body != nil)
    }

    /// A replicated insert from the same remote after an acknowledgement: the newer pin wins,
    /// the older revision loses its body, and the row goes.
    @Test func aPulledRevisionSupersedesTheAcknowledgedOne() throws {
        let (a, da) = try freshDatabase()
        let (b, db) = try freshDatabase()
        _ = db
        let (_, first) = try save(a, Document(id: "doc", properties: ["v": 1]))
        try pushCurrent("doc", from: a, to: b)
        try a.setRemoteRevisions([(documentID: "doc", revisionID: first)], remote: "b")
        var onB = try #require(try b.document("doc"))
        onB.properties["v"] = 2
        let (_, second) = try save(b, onB)
        let history = try #require(try b.revisionTree(of: "doc")).history(of: second).map(\.description)
        try a.insert(ReplicatedRevision(documentID: "doc", history: history, body: json(#"{"v":2}"#), isDeleted: false),
                     fromRemote: "b")
        #expect(try a.remoteRevisions(of: ["doc"], remote: "b") == ["doc": second])
        #expect(try rows(da) == 0)
        #expect(try a.revisionTree(of: "doc")?.nodes[first]?.body == nil)
    }
}
