import FerryStore
@testable import FerrySync
import Foundation
import Testing

/// Runs `ferry`; returns its exit status, standard output as bytes, and standard error.
func runFerryCapturing(_ args: [String]) async throws -> (status: Int32, output: [UInt8], error: String) {
    let p = Process()
    p.executableURL = ferryExecutable
    p.arguments = args
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let (outHandle, errHandle) = (out.fileHandleForReading, err.fileHandleForReading)
    // Both pipes drain at once, so a child filling one cannot block on it.
    async let stdout = offPool { outHandle.readDataToEndOfFile() }
    async let stderr = offPool { errHandle.readDataToEndOfFile() }
    let (o, e) = await (stdout, stderr)
    await offPool { p.waitUntilExit() }
    return (p.terminationStatus, Array(o), String(decoding: e, as: UTF8.self))
}

@Suite("ferry attachment and --download-rule")
struct AttachmentCommandTests {
    @Test func aPullWithASkipRuleLeavesTheLargeOneForAttachmentGet() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let small = Array("small and textual\n".utf8)
        let large = AttachmentReplicationTests.bytes((1 << 20) + 4096, seed: 7)
        var doc = Document(id: "report", properties: ["title": "Q3"])
        doc.setAttachment("summary.txt", blob: try naomi.db.writeBlob(small), contentType: "text/plain")
        doc.setAttachment("data.bin", blob: try naomi.db.writeBlob(large), contentType: "application/octet-stream")
        try naomi.db.save(doc)

        let dir = TempDir()
        let db = dir.path("olga.db")
        let sync = try await runFerryCapturing(["sync", naomi.url, "--db", db, "--pull", "--download-rule", "minLength=1MiB,skip",
                                                "--download-rule", "contentType=text/*,priority=10"])
        #expect(sync.status == 0, "\(sync.error)")
        #expect(String(decoding: sync.output, as: UTF8.self).contains("1 pulled"))

        let ls = try await runFerryCapturing(["attachment", "ls", "report", "--db", db])
        #expect(ls.status == 0, "\(ls.error)")
        #expect(String(decoding: ls.output, as: UTF8.self) == """
            data.bin\tapplication/octet-stream\t\(large.count)\tunfetched
            summary.txt\ttext/plain\t\(small.count)\tfetched

            """)

        // Unfetched and no peer: a clear error.
        let refused = try await runFerryCapturing(["attachment", "get", "report", "data.bin", "--db", db])
        #expect(refused.status == 1)
        #expect(refused.output.isEmpty)
        #expect(refused.error.contains("data.bin of report is not fetched here") && refused.error.contains("--peer"), "\(refused.error)")

        // A fetched one needs no peer.
        let text = try await runFerryCapturing(["attachment", "get", "report", "summary.txt", "--db", db])
        #expect(text.status == 0 && text.output == small)

        // On demand from the peer: the exact bytes, and it stays fetched.
        let got = try await runFerryCapturing(["attachment", "get", "report", "data.bin", "--db", db, "--peer", naomi.url])
        #expect(got.status == 0, "\(got.error)")
        #expect(got.output == large)
        let after = try await runFerryCapturing(["attachment", "ls", "report", "--db", db])
        #expect(String(decoding: after.output, as: UTF8.self).contains("data.bin\tapplication/octet-stream\t\(large.count)\tfetched"))
        let file = dir.path("copy.bin")
        let saved = try await runFerryCapturing(["attachment", "get", "report", "data.bin", "--db", db, "-o", file])
        #expect(saved.status == 0 && saved.output.isEmpty)
        #expect(FileManager.default.contents(atPath: file).map(Array.init) == large)

        let absent = try await runFerryCapturing(["attachment", "get", "report", "nope", "--db", db])
        #expect(absent.status == 1 && absent.error.contains("report has no attachment nope"))
        await naomi.stop()
    }

    @Test func aBadRuleIsRefusedSayingWhy() async throws {
        let dir = TempDir()
        let r = try await runFerryCapturing(["sync", "ws://127.0.0.1:1/x", "--db", dir.path("x.db"), "--pull",
                                             "--download-rule", "minLength=1MB,skip"])
        #expect(r.status != 0)
        #expect(r.error.contains("--download-rule") && r.error.contains("minLength must be a whole number of bytes"), "\(r.error)")
    }
}
