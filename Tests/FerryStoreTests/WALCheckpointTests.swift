@testable import FerryStore
import Foundation
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
