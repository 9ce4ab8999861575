import CFerrySystem
@testable import FerryStore
import Foundation
import Synchronization
import Testing

/// Async writes (`Database.write`) run on the database's own writer thread, so a burst of them
/// never occupies Swift's cooperative pool (2 threads on a 2-core machine).
@Suite struct WriterThreadTests {
    @Test func asyncWritesRunOnTheWriterThreadAndCommit() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        let (saved, thread) = try await db.write { (d) throws(StoreError) in
            (try d.save(Document(id: "a", properties: ["v": 1])), Self.currentThreadName())
        }
        #expect(thread == WriterThread.name)
        #expect(try db.document("a")?.revisionID == saved.revisionID)
        // A failure comes back typed, and nothing of it is kept.
        await #expect(throws: StoreError.self) {
            try await db.write { (d) throws(StoreError) in try d.save(Document(id: "a", properties: ["v": 2]), concurrencyControl: .failOnConflict) }
        }
        #expect(try db.document("a")?.properties["v"] == 1)
    }

    @Test func queuedWritesLeaveTheCooperativePoolFree() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        // The first write holds the writer until the probe has run, as a long commit would;
        // the others queue behind it. Were they waiting on the write lock in pool threads
        // (as before the writer had its own), the 2 pool threads of a 2-core machine would be
        // taken and the probe would never run.
        let release = DispatchSemaphore(value: 0)
        let holding = Mutex(false)
        let writes = 8
        let held = Task { _ = try? await db.write { (_) throws(StoreError) in holding.withLock { $0 = true }; release.wait() } }
        while !holding.withLock({ $0 }) { await Task.yield() }
        let others = Task {
            await withTaskGroup(of: Void.self) { g in
                for i in 1..<writes {
                    g.addTask { _ = try? await db.write { (d) throws(StoreError) in try d.save(Document(id: "w\(i)", properties: [:])) } }
                }
            }
        }
        // The held write has left the queue and the rest stay in it, so this count only grows.
        while db.writer.queuedWork < writes - 1 { await Task.yield() }
        let probe = await Task { db.writer.queuedWork }.value
        #expect(probe == writes - 1, "the probe ran while every write was still waiting")
        release.signal()
        await held.value
        await others.value
        #expect(try db.documentCount() == writes - 1)
    }

    /// Holds the writer's thread with one write until `queued` more have queued behind it, then
    /// lets them all run: those that queued together make one batch.
    static func queueBehindHeldWrite<T: Sendable>(_ db: Database, _ writes: [@Sendable (Database) throws(StoreError) -> T])
        async -> [Result<T, StoreError>] {
        let release = DispatchSemaphore(value: 0)
        let holding = Mutex(false)
        let held = Task { _ = try? await db.write { (_) throws(StoreError) in holding.withLock { $0 = true }; release.wait() } }
        while !holding.withLock({ $0 }) { await Task.yield() }
        let all = Task {
            await withTaskGroup(of: (Int, Result<T, StoreError>).self) { g in
                for (i, w) in writes.enumerated() {
                    g.addTask {
                        do throws(StoreError) { return (i, .success(try await db.write(w))) } catch { return (i, .failure(error)) }
                    }
                }
                var results = [(Int, Result<T, StoreError>)]()
                for await r in g { results.append(r) }
                return results.sorted { $0.0 < $1.0 }.map(\.1)
            }
        }
        while db.writer.queuedWork < writes.count { await Task.yield() }
        release.signal()
        await held.value
        return await all.value
    }

    @Test func writesQueuedTogetherShareOneCommitAndFailAlone() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        let first = try db.save(Document(id: "taken", properties: ["v": 1]))
        let before = db.writer.commits
        var writes: [@Sendable (Database) throws(StoreError) -> Int64] = []
        for i in 0..<6 { writes.append(Self.saving(i)) }
        // A failing write in the middle: its savepoint alone is rolled back.
        writes.insert(Self.savingThenConflicting, at: 3)
        let results = await Self.queueBehindHeldWrite(db, writes)
        #expect(db.writer.commits == before + 1, "the queued writes committed together")
        let sequences = results.compactMap { try? $0.get() }
        #expect(sequences.count == 6)
        guard case .failure(.conflict) = results[3] else {
            Issue.record("the conflicting write answered \(results[3])")
            return
        }
        // The failing write's first save stays (it was its own transaction); the second is gone.
        #expect(try db.document("x") != nil)
        #expect(try db.document("taken")?.properties["v"] == 1)
        #expect(try db.document("taken")?.revisionID == first.revisionID)
        // Sequences stay dense: the rolled-back save took none. (Which write queued first is
        // up to the pool threads that ran the tasks, so the order is not asserted.)
        let changes = try db.changes(since: first.sequence)
        #expect(changes.map(\.sequence) == Array(first.sequence + 1...first.sequence + 7))
        #expect(Set(changes.map(\.documentID)) == ["d0", "d1", "d2", "x", "d3", "d4", "d5"])
        for i in 0..<6 { #expect(try db.document("d\(i)")?.properties["i"] == .int(Int64(i))) }
    }

    static let savingThenConflicting: @Sendable (Database) throws(StoreError) -> Int64 = { (d: Database) throws(StoreError) -> Int64 in
        try d.save(Document(id: "x", properties: [:]))
        return try d.save(Document(id: "taken", properties: ["v": 2]), concurrencyControl: .failOnConflict).sequence
    }

    static let indexing: @Sendable (Database) throws(StoreError) -> Int64 = { (d: Database) throws(StoreError) -> Int64 in
        try d.createIndex(on: "i")
        return 0
    }

    static func saving(_ i: Int) -> @Sendable (Database) throws(StoreError) -> Int64 {
        { (d: Database) throws(StoreError) -> Int64 in try d.save(Document(id: "d\(i)", properties: ["i": .int(Int64(i))])).sequence }
    }

    @Test func aBatchsFirstWriteFailingLeavesTheRestToCommit() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        try db.save(Document(id: "taken", properties: ["v": 1]))
        let before = db.writer.commits
        // The first write opens the batch's transaction without a savepoint; its failure rolls
        // that transaction back, and the next write opens another.
        let results = await Self.queueBehindHeldWrite(db, [Self.conflicting, Self.saving(0), Self.saving(1)])
        guard case .failure(.conflict) = results[0] else {
            Issue.record("the conflicting write answered \(results[0])")
            return
        }
        #expect(db.writer.commits == before + 1)
        #expect(try results[2].get() == results[1].get() + 1)
        #expect(try db.document("d0") != nil && db.document("d1") != nil)
    }

    @Test func aFailingWriteThatChangedManyPagesIsRolledBackAlone() async throws {
        // A savepoint's journal holds the pages its write changed: in memory up to SQLite's
        // spill threshold (64 KiB by default), in a temporary file past it. One failing write
        // of each size, among writes that succeed, in one batch.
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        let count = 3_000  // ~2 KiB each: ~6 MiB of pages
        try await db.write { (d) throws(StoreError) in
            for i in 0..<count { try d.save(Document(id: "p\(i)", properties: ["v": 0, "f": .string(String(repeating: "a", count: 2_000))])) }
        }
        let revisions = try (0..<count).map { try db.document("p\($0)")?.revisionID }
        try db.save(Document(id: "taken", properties: ["v": 1]))
        let before = db.writer.commits
        let results = await Self.queueBehindHeldWrite(db, [
            Self.saving(0), Self.updatingThenConflicting(5), Self.saving(1), Self.updatingThenConflicting(count), Self.saving(2),
        ])
        #expect(db.writer.commits == before + 1, "the queued writes committed together")
        for failed in [1, 3] {
            guard case .failure(.conflict) = results[failed] else {
                Issue.record("write \(failed) answered \(results[failed])")
                return
            }
        }
        for i in 0..<3 { #expect(try db.document("d\(i)")?.properties["i"] == .int(Int64(i))) }
        let after = try (0..<count).map { try db.document("p\($0)")?.revisionID }
        let changed = zip(after, revisions).filter { $0 != $1 }.count
        #expect(changed == 0, "every change of the failed writes was rolled back")
        #expect(try db.document("p0")?.properties["v"] == 0)
    }

    static func updatingThenConflicting(_ n: Int) -> @Sendable (Database) throws(StoreError) -> Int64 {
        { (d: Database) throws(StoreError) -> Int64 in
            // One transaction: the conflict at its end rolls back every update before it.
            try d.inBatch { (b) throws(StoreError) -> Int64 in
                for i in 0..<n { try b.save(Document(id: "p\(i)", properties: ["v": 1, "f": .string(String(repeating: "b", count: 2_000))])) }
                return try b.save(Document(id: "taken", properties: ["v": 2]), concurrencyControl: .failOnConflict).sequence
            }
        }
    }

    static let conflicting: @Sendable (Database) throws(StoreError) -> Int64 = { (d: Database) throws(StoreError) -> Int64 in
        try d.save(Document(id: "taken", properties: ["v": 2]), concurrencyControl: .failOnConflict).sequence
    }

    @Test func readsInsideAWriteSeeWhatItWrote() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        // The save is not committed until the batch ends; reads in the same work see it anyway,
        // including the revision-tree reads that take a snapshot of their own.
        let (read, trees, count) = try await db.write { (d) throws(StoreError) in
            let saved = try d.save(Document(id: "a", properties: ["v": 1]))
            return (try d.document("a"), try d.revisionTrees(of: ["a"]), try d.changes(since: saved.sequence - 1).count)
        }
        #expect(read?.properties["v"] == 1)
        #expect(trees["a"] != nil)
        #expect(count == 1)
        // And a write queued behind another in the same batch sees it too. Which of two queued
        // together runs first is up to the pool threads, so each saves one document and looks
        // for the other's: the first finds nothing, the second finds the first's.
        let results = await Self.queueBehindHeldWrite(db, [Self.savingAndLooking("d0", for: "d1"), Self.savingAndLooking("d1", for: "d0")])
        #expect(try results.map { try $0.get() }.sorted() == [0, 1])
    }

    /// Saves `id`, then answers 1 if `other` exists, else 0.
    static func savingAndLooking(_ id: String, for other: String) -> @Sendable (Database) throws(StoreError) -> Int64 {
        { (d: Database) throws(StoreError) -> Int64 in
            try d.save(Document(id: id, properties: [:]))
            return Int64(try d.document(other) == nil ? 0 : 1)
        }
    }

    @Test func aWriteInsideAWriteIsRefusedNotDeadlocked() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        await #expect(throws: StoreError.self) {
            try await db.write(Self.nestedSave)
        }
        // Refused whole: the outer transaction rolled back, and the writer still works.
        #expect(try db.document("outer") == nil)
        let saved = try await db.write { (d) throws(StoreError) in try d.save(Document(id: "after", properties: [:])) }
        #expect(saved.sequence == 1)
    }

    static let nestedSave: @Sendable (Database) throws(StoreError) -> Void = { (d: Database) throws(StoreError) in
        try d.inBatch { (b) throws(StoreError) in
            _ = try b.save(Document(id: "outer", properties: [:]))
            _ = try d.save(Document(id: "inner", properties: [:]))
        }
    }

    @Test func settingsKeptInMemoryChangeOnceCommitted() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        let other: ConflictPolicy = db.conflictPolicy == .resolve ? .keep : .resolve
        try await db.write { (d) throws(StoreError) in try d.setConflictPolicy(other) }
        #expect(db.conflictPolicy == other)
        try await db.write { (d) throws(StoreError) in try d.setSecurity(["admins": ["names": ["x"]]]) }
        #expect(try db.security == ["admins": ["names": ["x"]]])
    }

    @Test func maintenanceInsideABatchCommitsWhatCameBefore() async throws {
        let (db, dir) = try freshDatabase()
        defer { db.close(); withExtendedLifetime(dir) {} }
        let before = db.writer.commits
        // `createIndex` runs outside any transaction; the batch commits the write queued before it.
        let results = await Self.queueBehindHeldWrite(db, [Self.saving(0), Self.indexing, Self.saving(1)])
        for r in results { #expect(throws: Never.self) { try r.get() } }
        #expect(db.writer.commits == before + 2)
        #expect(try db.documentCount() == 2)
    }

    @Test func workQueuedAfterCloseFailsClosed() async throws {
        let (db, dir) = try freshDatabase()
        defer { withExtendedLifetime(dir) {} }
        db.close()
        await #expect(throws: StoreError.closed) {
            try await db.write { (d) throws(StoreError) in try d.save(Document(id: "late", properties: [:])) }
        }
    }

    static func currentThreadName() -> String {
        var buffer = [CChar](repeating: 0, count: 32)
        _ = ferry_thread_name(&buffer, buffer.count)
        return String(cString: buffer)
    }
}
