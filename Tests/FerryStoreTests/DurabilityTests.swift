@testable import FerryStore
import Foundation
import Testing

/// A writer process killed with SIGKILL in the middle of a stream of batched commits: every
/// commit it reported is there after reopening, no batch is half there, and the file passes
/// `PRAGMA integrity_check`.
@Suite struct DurabilityTests {
    static var writerExecutable: URL {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("ferry-store-writer")
    }

    @Test(arguments: ["normal", "full"])
    func everyReportedCommitSurvivesSIGKILL(durability: String) throws {
        let dir = TempDir()
        let path = dir.path("durable.ferry")
        let batchSize = 50
        let process = Process()
        process.executableURL = Self.writerExecutable
        process.arguments = [path, String(batchSize), durability]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()

        // Read reports as they come; kill once enough commits have been reported, while the
        // writer is busy with the next batch.
        let target = durability == "full" ? 15 : 40
        var buffer = Data()
        var reported: [Int] = []
        var killed = false
        while true {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }   // EOF: the writer is gone
            buffer.append(chunk)
            while let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...nl)
                if line.hasPrefix("committed "), let n = Int(line.dropFirst(10)) { reported.append(n) }
            }
            if !killed && reported.count >= target {
                kill(process.processIdentifier, SIGKILL)
                killed = true
            }
        }
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(reported.count >= target)

        let db = try Database.open(at: path)
        defer { db.close() }
        #expect(try db.integrityCheck() == ["ok"])
        for n in reported {
            for i in 0..<batchSize {
                #expect(try db.document("b\(n)-\(i)")?["batch"] == .int(Int64(n)), "reported batch \(n) lost document \(i)")
            }
        }
        // Whatever else is there is whole batches only.
        let total = try db.documentCount()
        #expect(total % batchSize == 0)
        #expect(total / batchSize >= reported.count)
        #expect(db.lastSequence == Int64(total))
    }
}
