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
