import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// `ferry serve` as a child process: SIGTERM mid-pull, config file, JSON logs.
@Suite("ferry serve: shutdown, config file, logs", .serialized)
struct ShutdownTests {
    static let ferry = ServeProcess.executable

    /// Starts `ferry serve ARGS`; returns it once its first stdout line (it listens then) is read.
    static func serve(_ args: [String], stderr: FileHandle? = nil) async throws -> (Process, String) {
        let p = Process()
        let out = Pipe()
        p.executableURL = ferry
        p.arguments = ["serve"] + args
        p.standardOutput = out
        p.standardError = stderr ?? FileHandle.nullDevice
        try p.run()
        return (p, await ServeProcess.firstLine(of: out))
    }

    /// SIGTERM; the exit status and how long the exit took.
    static func terminate(_ p: Process) async -> (status: Int32, reason: Process.TerminationReason, seconds: Double) {
        let start = ContinuousClock.now
        kill(p.processIdentifier, SIGTERM)
        // The exit is timed on the thread that sees it: resuming this task can wait for a
        // cooperative-pool thread, which the suites running beside this one may keep busy.
        let exited = await offPool { p.waitUntilExit(); return ContinuousClock.now }
        let d = exited - start
        return (p.terminationStatus, p.terminationReason, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    }

    /// 100,000 documents served; a pull from this process; SIGTERM to the server mid-pull: it
    /// exits 0 within the 8 s docs/daemon.md promises. Served again on the same port (the
    /// checkpoint is per URL), a second pull resumes from the checkpoint (fewer than 100,000
    /// transferred) and ends with all.
    @Test func sigtermMidPullExitsCleanlyAndThePullResumes() async throws {
        let dir = TempDir()
        let total = 100_000
        do {
            let db = try Database.open(at: dir.path("big.db"))
            try db.inBatch { (b) throws(StoreError) in
                for i in 0..<total { try b.save(Document(id: String(format: "doc-%06d", i), properties: ["i": .int(Int64(i))])) }
            }
            db.close()
        }
        let (server, line) = try await Self.serve(["--db", dir.path("big.db"), "--port", "0", "--allow-anonymous"])
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("ws://") }).replacingOccurrences(of: "/_blipsync", with: "")
        let port = try #require(url.split(separator: ":").last?.split(separator: "/").first.map(String.init))

        let local = try Database.open(at: dir.path("local.db"))
        var c = ReplicatorConfiguration(database: local, target: url)
        c.type = .pull
        c.maxAttemptWaitTime = 1
        let first = Replicator(configuration: c)
        let events = first.documentEvents()
        first.start()
        var pulledBefore = 0
        for await e in events where e.kind == .pulled {
            pulledBefore += 1
            if pulledBefore == 20_000 { break }
        }
        let (status, reason, seconds) = await Self.terminate(server)
        print("ferry serve exited \(status) \(seconds) s after SIGTERM, \(pulledBefore)+ documents into the pull")
        #expect(reason == .exit && status == 0)
        #expect(seconds < 8)
        await first.stop()
        let afterFirst = try local.documentCount()
        #expect(afterFirst >= 20_000 && afterFirst < total)

        let (again, _) = try await Self.serve(["--db", dir.path("big.db"), "--port", port, "--allow-anonymous"])
        let second = Replicator(configuration: c)
        let pulled = PulledCounter()
        second.addDocumentListener { e in if e.kind == .pulled { pulled.add() } }
        try await second.run()
        print("the resumed pull transferred \(pulled.value) of \(total) (\(afterFirst) were in before the SIGTERM)")
        #expect(pulled.value < total, "the second pull transferred \(pulled.value)")
        #expect(pulled.value >= total - afterFirst)
        #expect(try local.documentCount() == total)
        #expect(await Self.terminate(again).status == 0)
    }

    /// A reader of standard error that has stopped reading (its pipe full) does not stop the
    /// daemon: requests go on being answered while their access-log lines wait in memory. 1,500
    /// requests log ~160 KiB, more than a pipe holds (64 KiB) and less than the log's buffer
    /// (256 KiB); when each write of the log held the buffer's lock, the event loop stopped at
    /// its next access-log line once the pipe was full.
    @Test func aStalledLogReaderDoesNotStopRequests() async throws {
        let dir = TempDir()
        let stalled = Pipe()
        let (server, line) = try await Self.serve(["--db", dir.path("a.db"), "--port", "0", "--allow-anonymous"],
                                                  stderr: stalled.fileHandleForWriting)
        try stalled.fileHandleForWriting.close()
        let port = try #require(ServeProcess.port(inFirstLine: line))

        // One connection, kept alive, 1,500 GETs; the first that takes 30 s ends them all.
        let curl = Process()
        let out = Pipe()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-s", "--fail-early", "-o", "/dev/null", "-m", "30", "-w", "%{http_code}\n", "http://127.0.0.1:\(port)/?n=[1-1500]"]
        curl.standardOutput = out
        try curl.run()
        let codes = await offPool { String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        curl.waitUntilExit()

        // The log is read again, so the daemon can write its last lines and exit.
        let reader = stalled.fileHandleForReading
        let drained = Task { await offPool { _ = reader.readDataToEndOfFile() } }
        let (status, _, _) = await Self.terminate(server)
        await drained.value
        let answered = codes.split(separator: "\n").filter { $0 == "200" }.count
        #expect(answered == 1500, "\(answered) of 1,500 requests answered")
        #expect(status == 0)
    }

    /// `--config FILE` sets the serve options; a flag given on the command line wins; the JSON
    /// log format writes one object per line on stderr; an unknown key is refused.
    @Test func configFileAndJSONLogs() async throws {
        let dir = TempDir()
        let config = dir.path("ferry.json")
        try Data("""
            {"db": "\(dir.path("x.db"))", "name": "fromfile", "port": 4999, "allow-anonymous": true,
             "anonymous-role": "admin", "log-format": "json", "log-level": "debug", "heartbeat": 5}
            """.utf8).write(to: URL(fileURLWithPath: config))
        let errPath = dir.path("stderr.txt")
        FileManager.default.createFile(atPath: errPath, contents: nil)
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let (p, line) = try await Self.serve(["--config", config, "--port", "0"], stderr: err)
        #expect(line.contains("/fromfile/_blipsync"), "\(line)")
        #expect(!line.contains(":4999/"), "the command line's --port 0 wins: \(line)")
        // Anonymous admin (from the file) may read the metrics.
        let base = try #require(line.split(separator: " ").first { $0.hasPrefix("http://") }).replacingOccurrences(of: "/fromfile", with: "")
        let port = try #require(Int(base.split(separator: ":").last ?? ""))
        let metrics = try await HTTPTestClient.send(port: port, method: "GET", path: "/_metrics", headers: [], body: nil)
        #expect(metrics.status == 200)
        #expect(await Self.terminate(p).status == 0)
        try err.close()
        let lines = try String(contentsOfFile: errPath, encoding: .utf8).split(separator: "\n")
        #expect(!lines.isEmpty)
        for l in lines {
            let o = try JSONParser.parseObject(Array(l.utf8))
            #expect(o["ts"]?.stringValue != nil && o["level"]?.stringValue != nil && o["label"]?.stringValue != nil && o["msg"]?.stringValue != nil, "\(l)")
        }
        #expect(lines.contains { $0.contains(#""level":"debug""#) })
        #expect(String(lines[0]).hasPrefix(#"{"ts":""#))

        try Data(#"{"prot": 1}"#.utf8).write(to: URL(fileURLWithPath: config))
        let bad = Process()
        bad.executableURL = Self.ferry
        bad.arguments = ["serve", "--config", config]
        let badErr = Pipe()
        bad.standardError = badErr
        bad.standardOutput = FileHandle.nullDevice
        try bad.run()
        let message = await offPool { String(decoding: badErr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        await offPool { bad.waitUntilExit() }
        #expect(bad.terminationStatus != 0)
        #expect(message.contains("unknown key \"prot\""), "\(message)")
    }
}

/// A count bumped from the replicator's callbacks.
final class PulledCounter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
