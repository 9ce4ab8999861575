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
    /// A WAL-mode file with one table, its write connection watched by a checkpointer with a
    /// 16-page threshold.
    struct Fixture {
        let dir = TempDir()
        let path: String
        let writer: Connection
        let checkpointer: WALCheckpointer

        init(beforePass: (@Sendable () -> Void)? = nil, afterPass: (@Sendable () -> Void)? = nil) throws {
            path = dir.path("restart.db")
            writer = try Connection(path: path)
            _ = try writer.strings("PRAGMA journal_mode=WAL")
            try writer.execute("CREATE TABLE t (x BLOB)")
            checkpointer = WALCheckpointer(path: path, thresholdPages: 16, synchronous: "NORMAL",
                                           beforePass: beforePass, afterPass: afterPass)
            checkpointer.install(on: writer.handle)
        }

        /// ~40 pages in one commit: past the threshold, under the writer's own FULL fallback (64).
        func commitBulk() throws {
            try writer.execute("BEGIN; \(String(repeating: "INSERT INTO t VALUES (zeroblob(4000));", count: 40)) COMMIT")
        }

        /// The WAL's frames, as `wal_checkpoint` reports them before it copies them.
        func walFrames() throws -> Int64 {
            let reader = try Connection(path: path)
            defer { reader.close() }
            let result = try reader.prepare("PRAGMA wal_checkpoint(PASSIVE)")
            defer { result.reset() }
            guard try result.step() else { return -1 }
            return result.int64(1)
        }

        func close() {
            checkpointer.uninstall(from: writer.handle)
            checkpointer.close()
            writer.close()
        }
    }

    @Test func theWALStartsOverAfterACheckpointThatCommitsRacedWith() throws {
        // Frames appended while a pass copies, as a stream of commits does: a reader that
        // began before the pass keeps the WAL from starting over under a commit from another
        // connection right after it, so that commit's frames follow the ones the pass copied.
        let others = Mutex<(reader: Connection, writer: Connection)?>(nil)
        let fixture = try Fixture(beforePass: {
            others.withLock { o in
                _ = try? o?.reader.execute("BEGIN; SELECT count(*) FROM t;")
            }
        }, afterPass: {
            others.withLock { o in
                try? o?.writer.execute("INSERT INTO t VALUES (zeroblob(1000))")
                try? o?.reader.execute("COMMIT")
                o = nil
            }
        })
        defer { fixture.close() }
        let reader = try Connection(path: fixture.path)
        defer { reader.close() }
        let second = try Connection(path: fixture.path)
        defer { second.close() }
        others.withLock { $0 = (reader, second) }

        try fixture.commitBulk()
        fixture.checkpointer.waitUntilIdle()
        #expect(others.withLock { $0 == nil }, "the background pass ran and the raced commit landed")
        #expect(fixture.checkpointer.copiedAllItSaw)
        try fixture.writer.execute("INSERT INTO t VALUES (zeroblob(1000))")   // copies the raced commit's frames
        try fixture.writer.execute("INSERT INTO t VALUES (zeroblob(1000))")   // starts the WAL over

        // Only the last commit's frames if the WAL started over; the whole bulk (40+) if not.
        let frames = try fixture.walFrames()
        #expect(frames > 0 && frames <= 4, "the WAL holds \(frames) frames")
        #expect(try fixture.writer.scalarInt("SELECT count(*) FROM t") == 43)
    }

    @Test func aBackgroundPassSyncsTheDatabaseFileItCopiedInto() throws {
        // SQLite itself skips that sync whenever a commit lands during the pass, leaving the
        // writer's next checkpoint to sync everything the pass copied.
        let fixture = try Fixture()
        defer { fixture.close() }
        #expect(fixture.checkpointer.databaseSyncs == 0)
        try fixture.commitBulk()
        fixture.checkpointer.waitUntilIdle()
        #expect(fixture.checkpointer.databaseSyncs == 1)
        #expect(try fixture.writer.scalarInt("SELECT count(*) FROM t") == 40)
    }

    @Test func aReaderHoldingAnOldSnapshotLeavesTheRestToLaterPasses() throws {
        let fixture = try Fixture()
        defer { fixture.close() }
        let reader = try Connection(path: fixture.path)
        defer { reader.close() }
        try reader.execute("BEGIN")
        #expect(try reader.scalarInt("SELECT count(*) FROM t") == 0)

        try fixture.commitBulk()
        fixture.checkpointer.waitUntilIdle()
        // The pass could not copy past the reader's snapshot, so the writer must not take on
        // the rest (the whole bulk) as its "small remainder".
        #expect(!fixture.checkpointer.copiedAllItSaw)
        try reader.execute("COMMIT")
    }
}
