import FerryTestSupport
import Foundation
import Testing

/// `ferry-bench sync`, the benchmark behind docs/performance.md's push and pull figures, run
/// small: it must still replicate every document and clean up after itself, including the
/// files its `ferry serve` children write beside their databases as they stop.
@Suite("ferry-bench sync")
struct SyncBenchProcessTests {
    @Test func aSmallRunReplicatesEverythingAndLeavesNoFileBehind() async throws {
        let dir = TempDir()
        let p = Process()
        p.executableURL = ferryExecutable.deletingLastPathComponent().appendingPathComponent("ferry-bench")
        p.arguments = ["sync", "--replication-only", "--count", "300", "--simple-window", "20", "--dir", dir.url.path]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let handle = out.fileHandleForReading
        let output = String(decoding: await offPool { handle.readDataToEndOfFile() }, as: UTF8.self)
        await offPool { p.waitUntilExit() }

        #expect(p.terminationStatus == 0, "\(output)")
        #expect(output.contains("stored 300"), "\(output)")
        #expect(output.range(of: #"pulled documents\s+300\n"#, options: .regularExpression) != nil, "\(output)")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(left.isEmpty, "left behind: \(left)")
    }
}
