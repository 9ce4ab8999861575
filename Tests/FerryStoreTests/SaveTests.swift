@testable import FerryStore
import Testing

/// Saving with concurrency control and conflict handlers (docs/store.md §6), deletion, purge.
@Suite struct SaveTests {
    @Test func failOnConflictRefusesAStaleSaveAndWritesNothing() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let original = try db.save(Document(id: "d", properties: ["name": "a"]))
        var first = original, stale = original
        first["name"] = "b"
        try db.save(first)
        let seq = db.lastSequence
        stale["name"] = "c"
        #expect(throws: StoreError.conflict(documentID: "d")) { try db.save(stale, concurrencyControl: .failOnConflict) }
        #expect(try db.document("d")?["name"] == "b")
        #expect(db.lastSequence == seq)
        // Not stale: succeeds.
        var fresh = try #require(try db.document("d"))
        fresh["name"] = "d"
        #expect(try db.save(fresh, concurrencyControl: .failOnConflict)["name"] == "d")
    }

    @Test func lastWriteWinsOverwritesAsAChildOfTheCurrentRevision() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let original = try db.save(Document(id: "d", properties: ["name": "a"]))
        var first = original, stale = original
        first["name"] = "b"
        let saved = try db.save(first)
        stale["name"] = "c"
        let overwritten = try db.save(stale)
        #expect(try db.document("d")?["name"] == "c")
        #expect(try db.revisionTree(of: "d")?.nodes[try #require(overwritten.revisionID)]?.parent == saved.revisionID)
        #expect(try db.conflictingRevisions(of: "d").isEmpty)
    }

    @Test func aConflictHandlerMerges() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let original = try db.save(Document(id: "xyz", properties: ["name": "x", "count": 1]))
        var other = original
        other["count"] = 2
        other["color"] = "red"
        try db.save(other)
        var mine = original
        mine["name"] = "apples"
        let saved = try db.save(mine) { new, current in
            // A merging handler: keep the new values, take the rest from the current document.
            guard let current else { return false }
            new.properties.merge(current.properties) { first, _ in first }
            return true
        }
        #expect(saved.properties == ["name": "apples", "count": 1, "color": "red"])
        #expect(try db.document("xyz")?.properties == ["name": "apples", "count": 1, "color": "red"])
        // A handler that declines: conflict, nothing written.
        var stale = original
        stale["name"] = "pears"
        #expect(throws: StoreError.conflict(documentID: "xyz")) { try db.save(stale) { _, _ in false } }
        #expect(try db.document("xyz")?["name"] == "apples")
    }

    @Test func aSaveOverAConcurrentDeletionLosesEvenWithLastWriteWins() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let original = try db.save(Document(id: "d", properties: ["n": 1]))
        try db.delete(original)
        var stale = original
        stale["n"] = 2
        #expect(throws: StoreError.conflict(documentID: "d")) { try db.save(stale) }
        #expect(try db.document("d") == nil)
        // A new document with the same ID may recreate it, continuing from the tombstone.
        let recreated = try db.save(Document(id: "d", properties: ["n": 3]))
        #expect(recreated.revisionID?.generation == 3)
        #expect(try db.document("d")?["n"] == 3)
    }

    @Test func deleteWithConcurrencyControl() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let original = try db.save(Document(id: "d", properties: ["n": 1]))
        var newer = original
        newer["n"] = 2
        try db.save(newer)
        #expect(throws: StoreError.conflict(documentID: "d")) { try db.delete(original, concurrencyControl: .failOnConflict) }
        #expect(try db.document("d")?["n"] == 2)
        let tomb = try db.delete(original)   // last write wins: deletes the current revision
        #expect(tomb.isDeleted && tomb.revisionID?.generation == 3)
        #expect(try db.document("d") == nil)
        #expect(throws: StoreError.notFound) { try db.delete(Document(id: "never")) }
    }

    @Test func aDeletionCanKeepFieldsForFilters() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        var doc = try db.save(Document(id: "job", properties: ["worker_id": "w7", "payload": "big"]))
        doc.properties = ["worker_id": "w7", "_deleted": true]
        let tomb = try db.save(doc)
        #expect(tomb.isDeleted)
        let stored = try #require(try db.document("job", includeDeleted: true))
        #expect(stored.isDeleted && stored.properties == ["worker_id": "w7"])
        #expect(try db.document("job") == nil)
        #expect(try db.changes(since: 0).last?.isDeleted == true)
    }

    @Test func purgeRemovesTheDocumentEntirely() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.save(Document(id: "p", properties: ["a": 1]))
        try db.purge("p")
        #expect(try db.document("p", includeDeleted: true) == nil)
        #expect(try db.revisionTree(of: "p") == nil)
        #expect(throws: StoreError.notFound) { try db.purge("p") }
        // Sequences are never reused after a purge.
        let again = try db.save(Document(id: "p", properties: ["a": 2]))
        #expect(again.sequence == 2)
    }

    @Test func aBatchCommitsTogetherOrNotAtAll() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        #expect(throws: StoreError.invalidDocumentID("_bad")) {
            try db.inBatch { (b) throws(StoreError) in
                try b.save(Document(id: "one"))
                try b.save(Document(id: "_bad"))
            }
        }
        #expect(try db.document("one") == nil)
        #expect(db.lastSequence == 0)
        try db.inBatch { (b) throws(StoreError) in
            for i in 0..<10 { try b.save(Document(id: "d\(i)")) }
        }
        #expect(try db.documentCount() == 10)
        #expect(db.lastSequence == 10)
    }
}
