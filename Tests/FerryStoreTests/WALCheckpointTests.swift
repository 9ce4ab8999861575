@testable import FerryStore
import Foundation
import Synchronization
import Testing

/// Checkpoints run beside the writer (WALCheckpointer): the WAL stays bounded while commits
/// stream in, and everything committed is in the database file once it is closed.
@Suite struct WALCheckpointTests {
    @Test func walStaysBoundedAndEverythingSurvivesReopening() throws {
        var options = DatabaseOptions()
        options.walAutoCheckpointPages = 64          // 512 KiB of 8 KiB pages: a small threshold to cross often
        let (db, dir) = try freshDatabase(options)
        let path = db.path
        let pad = String(repeating: "x", count: 2000)
        var largestWAL: Int64 = 0
        for batch in 0..<100 {
            try db.inBatch { (b) throws(StoreError) in
                for i in 0..<50 {
                    try b.save(Document(id: "d\(batch)-\(i)", properties: ["pad": .string(pad), "i": .int(Int64(i))]))
                }
            }
            let attributes = try? FileManager.default.attributesOfItem(atPath: path + "-wal")
            largestWAL = max(largestWAL, (attributes?[.size] as? NSNumber)?.int64Value ?? 0)
        }
        // ~10 MiB committed. Without checkpoints the WAL would hold all of it; with them it
        // never grows far past the inline fallback (4 × 64 pages) plus a transaction.
        #expect(largestWAL > 0)
        #expect(largestWAL < Int64(4 * 64 * options.pageSize + (1 << 20)), "WAL grew to \(largestWAL) bytes")
        db.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "closing checkpoints and removes the WAL")
        let reopened = try Database.open(at: path)
        #expect(try reopened.documentCount() == 5000)
        #expect(try reopened.integrityCheck() == ["ok"])
        reopened.close()
        _ = dir
    }
}

/// The WAL starts over once a checkpoint has copied it all, even though commits land while a
/// background pass copies: the writer copies what they added, so a bulk load rewrites one small
/// WAL instead of growing it (WALCheckpointer).
@Suite struct WALRestartTests {
    @Test func theWALStartsOverAfterACheckpointThatCommitsRacedWith() throws {
        let dir = TempDir()
        let path = dir.path("restart.db")
        let writer = try Connection(path: path)
        _ = try writer.strings("PRAGMA journal_mode=WAL")
        try writer.execute("CREATE TABLE t (x BLOB)")
        let raced = Mutex(false)
        // One commit lands after the background pass has copied, before the writer's next commit.
        let checkpointer = WALCheckpointer(path: path, thresholdPages: 16, synchronous: "NORMAL", afterPass: {
            guard raced.withLock({ r in defer { r = true }; return !r }) else { return }
            try? writer.execute("INSERT INTO t VALUES (zeroblob(1000))")
        })
        checkpointer.install(on: writer.handle)
        defer {
            checkpointer.uninstall(from: writer.handle)
            checkpointer.close()
            writer.close()
        }

        try writer.execute("BEGIN; \(String(repeating: "INSERT INTO t VALUES (zeroblob(4000));", count: 40)) COMMIT")
        checkpointer.waitUntilIdle()
        #expect(raced.withLock { $0 }, "the background pass ran")
        try writer.execute("INSERT INTO t VALUES (zeroblob(1000))")   // copies the raced commit's frames
        try writer.execute("INSERT INTO t VALUES (zeroblob(1000))")   // starts the WAL over

        // `wal_checkpoint` reports the WAL's frames before it copies them: only the last
        // commit's if the WAL started over, the whole bulk (40+ pages) if it kept growing.
        let reader = try Connection(path: path)
        defer { reader.close() }
        let result = try reader.prepare("PRAGMA wal_checkpoint(PASSIVE)")
        defer { result.reset() }
        #expect(try result.step())
        let frames = result.int64(1)
        #expect(frames > 0 && frames <= 4, "the WAL holds \(frames) frames")
        #expect(try reader.scalarInt("SELECT count(*) FROM t") == 43)
    }
}
