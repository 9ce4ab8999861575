@testable import FerryStore
import Testing

/// Validation functions (docs/store.md §7): local saves and replicated revisions, message and status,
/// context, and nothing written on rejection.
@Suite struct ValidationTests {
    static let dateCheck: Validator = { rev, _ in
        if rev.isDeletion { return .accept }
        if let date = rev.properties["created_at"], date.stringValue?.count != 20 {
            return .reject(message: "invalid date \(date)")
        }
        return .accept
    }

    @Test func aRejectedLocalSaveThrowsMessageAndStatusAndWritesNothing() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        db.setValidation(named: "created_at", Self.dateCheck)
        try db.save(Document(id: "ok", properties: ["created_at": "2026-11-22T10:00:00Z"]))
        let seq = db.lastSequence
        #expect(throws: StoreError.rejected(status: 403, message: "invalid date string(\"yesterday\")")) {
            try db.save(Document(id: "bad", properties: ["created_at": "yesterday"]))
        }
        #expect(try db.document("bad") == nil)
        #expect(db.lastSequence == seq)
        #expect(try db.changes(since: seq).isEmpty)
    }

    @Test func aValidatorCanAsk401() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        db.setValidation(named: "auth") { rev, _ in
            rev.properties["owner"] == nil ? .reject(message: "login required", status: 401) : .accept
        }
        #expect(throws: StoreError.rejected(status: 401, message: "login required")) { try db.save(Document(id: "x")) }
        db.setValidation(named: "auth", nil)
        try db.save(Document(id: "x"))
    }

    @Test func theContextHasTheCurrentRevisionAndChangedKeys() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        var task = try db.save(Document(id: "t", properties: ["status": "open", "title": "x"]))
        db.setValidation(named: "immutable-and-completed") { rev, ctx in
            if rev.isDeletion {
                return ctx.currentRevision?["status"] == "completed" ? .accept : .reject(message: "only completed tasks can be deleted")
            }
            if ctx.changedKeys.contains("title") { return .reject(message: "title is immutable; changed \(ctx.changedKeys)") }
            return .accept
        }
        task["title"] = "y"
        task["extra"] = 1
        #expect(throws: StoreError.rejected(status: 403, message: "title is immutable; changed [\"extra\", \"title\"]")) { try db.save(task) }
        let current = try #require(try db.document("t"))
        #expect(throws: StoreError.rejected(status: 403, message: "only completed tasks can be deleted")) { try db.delete(current) }
        var done = current
        done["status"] = "completed"
        let saved = try db.save(done)
        try db.delete(saved)
        #expect(try db.document("t") == nil)
    }

    @Test func aRejectedReplicatedRevisionIsNotInserted() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        db.setValidation(named: "created_at", Self.dateCheck)
        let good = ReplicatedRevision(documentID: "r", history: ["1-aa"], body: json(#"{"created_at":"2026-11-22T10:00:00Z"}"#))
        try db.insert(good)
        let seq = db.lastSequence
        let treeBefore = try db.revisionTree(of: "r")
        let bad = ReplicatedRevision(documentID: "r", history: ["2-bb", "1-aa"], body: json(#"{"created_at":"nope"}"#))
        #expect(throws: StoreError.rejected(status: 403, message: "invalid date string(\"nope\")")) { try db.insert(bad) }
        #expect(db.lastSequence == seq)
        #expect(try db.revisionTree(of: "r") == treeBefore)
        // In a batch the rejection is per revision; the others are stored.
        let results = try db.insert([bad, ReplicatedRevision(documentID: "s", history: ["1-cc"], body: json("{}"))])
        #expect(results.count == 2)
        if case .failure(let e) = results[0] { #expect(e == .rejected(status: 403, message: "invalid date string(\"nope\")")) } else { Issue.record("expected failure") }
        if case .success(let o) = results[1] { #expect(o.status == .inserted) } else { Issue.record("expected success") }
        #expect(try db.revisionTree(of: "r") == treeBefore)
        #expect(try db.document("s") != nil)
    }

    @Test func validatorsSeeTheSourceOfTheRevision() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        db.setValidation(named: "no-replicated") { rev, _ in rev.source == .replicated ? .reject(message: "read-only") : .accept }
        try db.save(Document(id: "local"))
        #expect(throws: StoreError.rejected(status: 403, message: "read-only")) {
            try db.insert(ReplicatedRevision(documentID: "remote", history: ["1-ab"], body: json("{}")))
        }
    }
}
