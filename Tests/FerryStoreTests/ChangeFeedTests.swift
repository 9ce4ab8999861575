@testable import FerryStore
import Testing

/// The change feed, the live feed, and local documents.
@Suite struct ChangeFeedTests {
    @Test func changesComeInSequenceOrderOncePerDocument() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        var a = try db.save(Document(id: "a"))
        try db.save(Document(id: "b"))
        a["x"] = 1
        a = try db.save(a)
        try db.delete(try #require(try db.document("b")))
        let all = try db.changes(since: 0)
        #expect(all.map(\.documentID) == ["a", "b"])
        #expect(all.map(\.sequence) == [3, 4])
        #expect(all[0].revisionID == a.revisionID && !all[0].isDeleted)
        #expect(all[1].isDeleted)
        #expect(try db.changes(since: 3).map(\.documentID) == ["b"])
        #expect(try db.changes(since: 0, limit: 1).map(\.documentID) == ["a"])
        #expect(try db.pendingChangeCount(since: 3) == 1)
        #expect(throws: StoreError.invalidArgument("limit must be positive")) { try db.changes(since: 0, limit: 0) }
    }

    /// A batch of replicated revisions first tries each as a new document (`insertIfNew`);
    /// one that exists falls back to the general path. Either way the outcomes are the general
    /// path's and the sequences stay gapless.
    @Test func aBatchMixingNewAndExistingDocumentsKeepsSequencesGapless() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.insert(ReplicatedRevision(documentID: "old", history: ["1-aa"], body: json(#"{"v":1}"#)))
        let outcomes = try db.insert([
            ReplicatedRevision(documentID: "new1", history: ["1-bb"], body: json(#"{"v":1}"#)),
            ReplicatedRevision(documentID: "old", history: ["2-cc", "1-aa"], body: json(#"{"v":2}"#)),
            ReplicatedRevision(documentID: "new2", history: ["1-dd"], body: json(#"{"v":1}"#)),
            ReplicatedRevision(documentID: "old", history: ["2-cc", "1-aa"], body: json(#"{"v":2}"#)),
            ReplicatedRevision(documentID: "new1", history: ["1-ee"], body: json(#"{"v":3}"#)),
        ], fromRemote: "ws://peer/db")
        let results = try outcomes.map { try $0.get() }
        #expect(results.map(\.status) == [.inserted, .inserted, .inserted, .noop, .inserted])
        #expect(results.map(\.sequence) == [2, 3, 4, nil, 5])
        #expect(results[1].current == rev("2-cc") && results[1].conflictedWith == nil)
        #expect(results[4].conflictedWith == rev("1-bb") || results[4].conflictedWith == rev("1-ee"))
        let feed = try db.changes(since: 0)
        #expect(feed.map(\.sequence) == [3, 4, 5])
        #expect(feed.map(\.documentID) == ["old", "new2", "new1"])
        #expect(try db.document("new2")?["v"] == 1)
        #expect(try db.remoteRevisions(of: ["new2", "old"], remote: "ws://peer/db") == ["new2": rev("1-dd"), "old": rev("2-cc")])
        // Again in a fresh transaction that starts with an existing document.
        let again = try db.insert([ReplicatedRevision(documentID: "new2", history: ["2-f0", "1-dd"], body: json(#"{"v":2}"#)),
                                   ReplicatedRevision(documentID: "new3", history: ["1-a0"], body: json(#"{"v":1}"#))])
        #expect(try again.map { try $0.get().sequence } == [6, 7])
        #expect(db.lastSequence == 7)
    }

    @Test func theLiveFeedDeliversCommitsAsTheyHappen() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.save(Document(id: "before"))
        let reader = Task { () throws -> [String] in
            var seen: [String] = []
            for try await change in db.liveChanges(since: 0, pageSize: 2) {
                seen.append(change.documentID)
                if seen.count == 6 { break }
            }
            return seen
        }
        for i in 0..<5 { try db.save(Document(id: "live\(i)")) }
        let seen = try await reader.value
        #expect(seen == ["before", "live0", "live1", "live2", "live3", "live4"])
    }

    @Test func theLiveFeedEndsOnCancellationAndOnClose() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let waiting = Task { () throws -> Int in
            var n = 0
            for try await _ in db.liveChanges() { n += 1 }
            return n
        }
        waiting.cancel()
        #expect(try await waiting.value == 0)
        let closing = Task { () throws -> Int in
            var n = 0
            for try await _ in db.liveChanges() { n += 1 }
            return n
        }
        try db.save(Document(id: "one"))
        db.close()
        #expect(try await closing.value <= 1)
    }

    @Test func localDocumentsHaveTheirOwnRevisionsAndNoChanges() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let r1 = try db.putLocalDocument("checkpoint/peer", properties: ["seq": 10])
        #expect(r1 == "0-1")
        let r2 = try db.putLocalDocument("checkpoint/peer", properties: ["seq": 20], expectedRevision: r1)
        #expect(r2 == "0-2")
        #expect(throws: StoreError.conflict(documentID: "checkpoint/peer")) {
            try db.putLocalDocument("checkpoint/peer", properties: ["seq": 30], expectedRevision: r1)
        }
        #expect(try db.localDocument("checkpoint/peer") == LocalDocument(id: "checkpoint/peer", revision: "0-2", properties: ["seq": 20]))
        #expect(try db.changes(since: 0).isEmpty)
        #expect(db.lastSequence == 0)
        try db.deleteLocalDocument("checkpoint/peer")
        #expect(try db.localDocument("checkpoint/peer") == nil)
        #expect(throws: StoreError.notFound) { try db.deleteLocalDocument("checkpoint/peer") }
    }
}
