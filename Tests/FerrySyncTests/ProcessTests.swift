import FerryStore
@testable import FerrySync
import Foundation
import Testing

/// The `ferry` executable, built beside the test bundle.
let ferryExecutable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    .deletingLastPathComponent().appendingPathComponent("ferry")

/// Runs `ferry` with arguments; returns its exit status and standard output.
@discardableResult
func runFerry(_ args: [String]) async throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = ferryExecutable
    p.arguments = args
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let handle = out.fileHandleForReading
    let data = await offPool { handle.readDataToEndOfFile() }
    await offPool { p.waitUntilExit() }
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Runs `ferry` with arguments until `count` document events of `kind` have arrived on
/// `events` (the serving peer's), then kills it with SIGKILL; returns how it ended.
func runFerryKilled(_ args: [String], after count: Int, of kind: DocumentEvent.Kind,
                    on events: AsyncStream<DocumentEvent>) async throws -> Process.TerminationReason {
    let p = Process()
    p.executableURL = ferryExecutable
    p.arguments = args
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    var seen = 0
    for await e in events where e.kind == kind {
        seen += 1
        if seen == count { break }
    }
    kill(p.processIdentifier, SIGKILL)
    await offPool { p.waitUntilExit() }
    return p.terminationReason
}

/// `count` small numbered documents (`doc-00000`…) saved in one transaction.
func saveNumberedDocuments(_ count: Int, into db: Database) throws {
    try db.inBatch { (b) throws(StoreError) in
        for i in 0..<count {
            try b.save(Document(id: String(format: "doc-%05d", i), properties: ["i": .int(Int64(i)), "pad": .string(String(repeating: "x", count: 100))]))
        }
    }
}

@Suite("Peer processes", .serialized)
struct ProcessTests {
    /// `ferry` runs on jemalloc (linked for speed, docs/performance.md): every library's
    /// `malloc` — the Swift runtime's, Foundation's, SQLite's — binds to it, not to glibc's.
    @Test func ferryRunsOnJemalloc() async throws {
        let (status, output) = try await runFerry(["--version"])
        #expect(status == 0)
        #expect(output.contains("jemalloc 5."), "\(output)")

        let dir = TempDir()
        let p = Process()
        p.executableURL = ferryExecutable
        p.arguments = ["--version"]
        p.environment = ["LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": dir.path("ld")]
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        await offPool { p.waitUntilExit() }
        let log = try String(contentsOfFile: dir.path("ld.\(p.processIdentifier)"), encoding: .utf8)
        let bindings = log.split(separator: "\n").filter { $0.contains("normal symbol `malloc'") }
        // "binding file <caller> [0] to <definer> [0]: normal symbol `malloc' …"
        #expect(bindings.contains { $0.contains("libswiftCore.so") }, "\(bindings)")
        #expect(bindings.allSatisfy { $0.components(separatedBy: " to ").last?.contains("libjemalloc.so") == true }, "\(bindings)")
    }

    @Test func pullKilledMidwayResumesFromItsCheckpoint() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let listener = try #require(naomi.listener)
        let total = 50_000
        try saveNumberedDocuments(total, into: naomi.db)
        let dir = TempDir()
        let mollyPath = dir.path("molly.ferry")
        let ended = try await runFerryKilled(["sync", naomi.url, "--db", mollyPath, "--pull"], after: 10_000, of: .pushed,
                                             on: listener.documentEvents())
        #expect(ended == .uncaughtSignal)
        let sentBeforeKill = listener.statistics.revisionMessagesSent
        #expect(sentBeforeKill < total, "killed part-way")

        let (status, output) = try await runFerry(["sync", naomi.url, "--db", mollyPath, "--pull"])
        #expect(status == 0, "\(output)")
        let molly = try Database.open(at: mollyPath)
        #expect(try molly.documentCount() == total)
        #expect(try molly.document("doc-49999")?["i"] == 49_999)
        #expect(try molly.integrityCheck() == ["ok"])
        molly.close()
        let sent = listener.statistics.revisionMessagesSent
        // Everything once, plus at most the one batch that was in flight when it was killed.
        #expect(sent <= total + ReplicatorConfiguration.defaultBatchSize, "rev messages sent: \(sent)")
        await naomi.stop()
    }

    /// The push side of the same: its checkpoint is saved at most once a second while it runs,
    /// so a killed pusher re-proposes what it pushed since; the peer answers that it has those,
    /// so nothing is sent twice beyond the batches in flight, and nothing is lost.
    @Test func pushKilledMidwayResumesAndSendsLittleTwice() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let listener = try #require(naomi.listener)
        let total = 50_000
        let dir = TempDir()
        let mollyPath = dir.path("molly.ferry")
        let molly = try Database.open(at: mollyPath)
        try saveNumberedDocuments(total, into: molly)
        molly.close()
        let ended = try await runFerryKilled(["sync", naomi.url, "--db", mollyPath, "--push"], after: 10_000, of: .pulled,
                                             on: listener.documentEvents())
        #expect(ended == .uncaughtSignal)
        #expect(try naomi.db.documentCount() < total, "killed part-way")

        let (status, output) = try await runFerry(["sync", naomi.url, "--db", mollyPath, "--push"])
        #expect(status == 0, "\(output)")
        #expect(try naomi.db.documentCount() == total)
        #expect(try naomi.db.document("doc-49999")?["i"] == 49_999)
        #expect(try naomi.db.integrityCheck() == ["ok"])
        let received = listener.statistics.revisionsReceived
        // Everything once, plus at most the four batches that were in flight when it was killed.
        #expect(received >= total && received <= total + 4 * ReplicatorConfiguration.defaultBatchSize,
                "revisions received: \(received)")
        await naomi.stop()
    }

    /// A pushes 1,000 documents to B; B's database is deleted and B restarted empty at the
    /// same URL: the next `ferry sync` from A restores all of them, with or without a reset.
    @Test(arguments: [false, true])
    func aWipedPeerIsRestoredByTheNextSync(reset: Bool) async throws {
        let dir = TempDir()
        let a = try Database.open(at: dir.path("a.db"))
        try saveNumberedDocuments(1000, into: a)
        a.close()
        let (first, url) = try await startServe(["--db", dir.path("b.db"), "--port", "0"])
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        #expect(try await runFerry(["sync", url, "--db", dir.path("a.db")]).status == 0)
        #expect(try await runFerry(["ls", "--db", dir.path("b.db")]).output.split(separator: "\n").count == 1000)
        kill(first.processIdentifier, SIGKILL)
        await offPool { first.waitUntilExit() }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: dir.path("b.db") + suffix) }
        let port = try #require(url.split(separator: ":").last?.split(separator: "/").first.map(String.init))
        let (wiped, _) = try await startServe(["--db", dir.path("b.db"), "--port", port])
        defer { if wiped.isRunning { kill(wiped.processIdentifier, SIGKILL) } }
        let sync = try await runFerry(["sync", url, "--db", dir.path("a.db")] + (reset ? ["--reset-checkpoint"] : []))
        #expect(sync.status == 0)
        #expect(try await runFerry(["ls", "--db", dir.path("b.db")]).output.split(separator: "\n").count == 1000)
        wiped.interrupt()
        await offPool { wiped.waitUntilExit() }
    }

    /// A one-shot `ferry sync` to a peer that stays unreachable gives up after `--timeout`
    /// seconds (60 by default) with a message saying so, instead of retrying for minutes.
    @Test func syncGivesUpOnAnUnreachablePeerAfterItsTimeout() async throws {
        let dir = TempDir()
        let p = Process()
        p.executableURL = ferryExecutable
        p.arguments = ["sync", "ws://127.0.0.1:1/nobody", "--db", dir.path("a.db"), "--timeout", "2"]
        let err = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        let started = ContinuousClock.now
        try p.run()
        let handle = err.fileHandleForReading
        let data = await offPool { handle.readDataToEndOfFile() }
        await offPool { p.waitUntilExit() }
        let message = String(decoding: data, as: UTF8.self)
        #expect(p.terminationStatus == 3, "exit 3: unreachable")
        #expect(message.contains("ferry: gave up on ws://127.0.0.1:1/nobody, unreachable after"), "\(message)")
        // Gave up (a guard for a busy machine, far from retrying on without end).
        #expect(ContinuousClock.now - started < .seconds(120))
    }

    @Test func serveMeshAndCommandLineEditsPropagate() async throws {
        let dir = TempDir()
        // Two `ferry serve` processes; B replicates continuously with A.
        let a = Process(), b = Process()
        // A failed expectation must not leave the servers running.
        defer { for p in [a, b] where p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        let aOut = Pipe(), bOut = Pipe()
        a.executableURL = ferryExecutable
        a.arguments = ["serve", "--db", dir.path("a.db"), "--port", "0", "--allow-anonymous"]
        a.standardOutput = aOut
        a.standardError = FileHandle.nullDevice
        try a.run()
        let aHandle = aOut.fileHandleForReading, bHandle = bOut.fileHandleForReading
        let aLine = try #require(await offPool { readLine(from: aHandle) })
        #expect(aLine.hasPrefix("ferry: serving"))
        let url = try #require(aLine.split(separator: " ").first { $0.hasPrefix("ws://") }).replacingOccurrences(of: "/_blipsync", with: "")
        b.executableURL = ferryExecutable
        b.arguments = ["serve", "--db", dir.path("b.db"), "--port", "0", "--allow-anonymous", "--replicate", url]
        b.standardOutput = bOut
        b.standardError = FileHandle.nullDevice
        try b.run()
        _ = await offPool { readLine(from: bHandle) }

        // A write by another process to A's file reaches B through both servers.
        try await runFerry(["put", "--db", dir.path("a.db"), "hello", #"{"from":"a"}"#])
        var watching = DatabaseOptions()
        watching.watchExternalWrites = true
        let bDB = try Database.open(at: dir.path("b.db"), options: watching)
        try await waitFor(bDB, "hello", revision: nil)
        #expect(try bDB.document("hello")?["from"] == "a")
        bDB.close()

        let get = try await runFerry(["get", "--db", dir.path("b.db"), "hello"])
        #expect(get.output.contains(#""_id":"hello""#) && get.output.contains(#""from":"a""#))
        for p in [b, a] {
            p.interrupt()
            await offPool { p.waitUntilExit() }
            #expect(p.terminationStatus == 0, "stops cleanly on SIGINT")
        }
    }
}

/// Starts `ferry serve` with `args`; returns the process, once it listens, and its peer URL.
func startServe(_ args: [String]) async throws -> (Process, String) {
    let p = Process()
    let out = Pipe()
    p.executableURL = ferryExecutable
    p.arguments = ["serve", "--allow-anonymous"] + args
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let handle = out.fileHandleForReading
    let line = try #require(await offPool { readLine(from: handle) })
    let url = try #require(line.split(separator: " ").first { $0.hasPrefix("ws://") }).replacingOccurrences(of: "/_blipsync", with: "")
    return (p, url)
}

/// Reads one line from a pipe with read(2) (Foundation's buffered readers can hang on pipes).
func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    var c: UInt8 = 0
    while read(handle.fileDescriptor, &c, 1) == 1 {
        if c == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(c)
    }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
}

@Suite("Heartbeat and continuous one-way replication")
struct HeartbeatTests {
    @Test func aFrozenPeerIsDetectedByTheHeartbeat() async throws {
        let dir = TempDir()
        let server = Process()
        let out = Pipe()
        server.executableURL = ferryExecutable
        server.arguments = ["serve", "--db", dir.path("frozen.db"), "--port", "0", "--allow-anonymous"]
        server.standardOutput = out
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        let handle = out.fileHandleForReading
        let line = try #require(await offPool { readLine(from: handle) })
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("ws://") }).replacingOccurrences(of: "/_blipsync", with: "")

        let molly = try await Peer.make("molly")
        var c = ReplicatorConfiguration(database: molly.db, target: url)
        c.continuous = true
        c.heartbeat = 0.3
        c.maxAttemptWaitTime = 0.3
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        r.start()
        for await s in statuses where s.activity == .idle { break }
        // The peer stops answering (its process is frozen, its socket stays open): only the
        // heartbeat can tell.
        kill(server.processIdentifier, SIGSTOP)
        var sawOffline = false
        for await s in statuses where s.activity == .offline {
            sawOffline = true
            #expect(s.lastError?.isTransient == true)
            break
        }
        #expect(sawOffline)
        kill(server.processIdentifier, SIGCONT)
        await r.stop()
        await molly.stop()
    }

    @Test(arguments: [ReplicatorConfiguration.ReplicatorType.push, .pull])
    func continuousOneWayReplicationPropagates(_ type: ReplicatorConfiguration.ReplicatorType) async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.type = type
        c.continuous = true
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        r.start()
        for await s in statuses where s.activity == .idle { break }
        let (from, to) = type == .push ? (molly, naomi) : (naomi, molly)
        for i in 0..<3 {
            let doc = try from.put("live-\(i)", ["i": .int(Int64(i))])
            try await waitFor(to.db, "live-\(i)", revision: doc.revisionID?.description)
        }
        // Nothing travels the other way.
        try to.put("stays", ["here": true])
        let marker = try from.put("marker", ["m": 1])
        try await waitFor(to.db, "marker", revision: marker.revisionID?.description)
        #expect(try from.db.document("stays") == nil)
        await r.stop()
        await molly.stop(); await naomi.stop()
    }
}
