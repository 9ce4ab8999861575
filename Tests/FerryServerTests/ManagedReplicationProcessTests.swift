import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Managed replications on real `ferry serve` processes (Protocol/replicator.md): they
/// survive SIGKILL and resume from their checkpoints; `exclusively` replaces the others.
@Suite("Managed replications: persistence, restart, exclusively", .serialized)
struct ManagedReplicationProcessTests {
    /// The daemon's REST client through its endpoint file (the local token), as the CLI uses it.
    struct Admin {
        let base: String
        let token: String

        init(dataDirectory: String) throws {
            let o = jsonObject(try String(contentsOfFile: dataDirectory + "/_daemon.json", encoding: .utf8))
            guard let url = o["url"]?.stringValue, let token = o["token"]?.stringValue else { throw CurlFailure(reason: "no _daemon.json") }
            base = url
            self.token = token
        }

        func call(_ method: String, _ path: String, _ json: String? = nil) async throws -> (status: Int, body: [String: JSONValue]) {
            var args = ["-X", method, "-H", "Authorization: Bearer \(token)", base + path]
            if let json { args += ["-H", "Content-Type: application/json", "-d", json] }
            let (status, body) = try await curl(args)
            return (status, jsonObject(body))
        }

        func jobs() async throws -> [String: [String: JSONValue]] {
            let r = try await call("GET", "/_scheduler/jobs")
            var out: [String: [String: JSONValue]] = [:]
            for j in r.body["jobs"]?.arrayValue ?? [] { if let o = j.objectValue, let id = o["id"]?.stringValue { out[id] = o } }
            return out
        }
    }

    /// Writes `count` documents of about 1 KB with IDs `prefix-N` into the database file.
    static func fill(_ path: String, prefix: String, count: Int) throws {
        let db = try Database.open(at: path)
        defer { db.close() }
        let filler = JSONValue.string(String(repeating: "x", count: 1000))
        try db.inBatch { (b: Batch) throws(StoreError) in
            for i in 0..<count { _ = try b.save(Document(id: "\(prefix)-\(i)", properties: ["n": .int(Int64(i)), "filler": filler])) }
        }
    }

    static func count(_ path: String) throws -> Int {
        let db = try Database.open(at: path)
        defer { db.close() }
        return try db.documentCount()
    }

    static func ferry(_ args: [String]) async throws -> (status: Int32, output: String) {
        let p = Process()
        let out = Pipe()
        p.executableURL = ServeProcess.executable
        p.arguments = args
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = await offPool { out.fileHandleForReading.readDataToEndOfFile() }
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// One replication of the ten: its ID, database, direction, kind, and whether doc_ids filter it.
    struct Case: Sendable { let id: String; let db: String; let direction: String; let continuous: Bool; let filtered: Bool }

    /// Ten replications of every kind; the daemon is SIGKILLed while they run and started
    /// again: all finish, none moves more than one batch it had already moved, and each one's
    /// history shows the restart.
    @Test func tenReplicationsSurviveSIGKILLAndResumeFromTheirCheckpoints() async throws {
        let dir = TempDir()
        let (a, b) = (dir.path("a"), dir.path("b"))
        for d in [a, b] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        let n = 2000, batch = 100, chosen = 200
        let cases = [
            Case(id: "push-continuous", db: "d0", direction: "push", continuous: true, filtered: false),
            Case(id: "pull-continuous", db: "d1", direction: "pull", continuous: true, filtered: false),
            Case(id: "both-continuous", db: "d2", direction: "both", continuous: true, filtered: false),
            Case(id: "push-once", db: "d3", direction: "push", continuous: false, filtered: false),
            Case(id: "pull-once", db: "d4", direction: "pull", continuous: false, filtered: false),
            Case(id: "both-once", db: "d5", direction: "both", continuous: false, filtered: false),
            Case(id: "pull-filtered", db: "d6", direction: "pull", continuous: false, filtered: true),
            Case(id: "push-filtered", db: "d7", direction: "push", continuous: true, filtered: true),
            Case(id: "pull-continuous-2", db: "d8", direction: "pull", continuous: true, filtered: false),
            Case(id: "push-once-2", db: "d9", direction: "push", continuous: false, filtered: false),
        ]
        for c in cases {
            switch c.direction {
            case "push": try Self.fill("\(a)/\(c.db).ferry", prefix: "a", count: n); try Self.fill("\(b)/\(c.db).ferry", prefix: "none", count: 0)
            case "pull": try Self.fill("\(b)/\(c.db).ferry", prefix: "b", count: n); try Self.fill("\(a)/\(c.db).ferry", prefix: "none", count: 0)
            default: try Self.fill("\(a)/\(c.db).ferry", prefix: "a", count: n / 2); try Self.fill("\(b)/\(c.db).ferry", prefix: "b", count: n / 2)
            }
        }
        let peer = try await ServeProcess(["--data", b, "--allow-anonymous"])
        defer {
            // A peer left frozen by a failed expectation could not act on SIGTERM.
            kill(peer.process.processIdentifier, SIGCONT)
            Task { await peer.stop() }
        }
        let first = try await ServeProcess(["--data", a, "--allow-anonymous"])
        let admin1 = try Admin(dataDirectory: a)
        // The peer is frozen (SIGSTOP) except while the test lets it run, one jobs poll at a
        // time: however loaded the machine, the replications are caught part-way. A frozen
        // peer's kernel still accepts connections; nothing else moves.
        let peerPID = peer.process.processIdentifier
        kill(peerPID, SIGSTOP)
        for c in cases {
            var doc = #"{"database":"\#(c.db)","peer":"\#(peer.wsURL)/\#(c.db)","direction":"\#(c.direction)","continuous":\#(c.continuous),"batch_size":\#(batch)"#
            if c.filtered {
                let prefix = c.direction == "pull" ? "b" : "a"
                doc += #","doc_ids":[\#((0..<chosen).map { "\"\(prefix)-\($0 * 3)\"" }.joined(separator: ","))]"#
            }
            let r = try await admin1.call("PUT", "/_replicator/\(c.id)", doc + "}")
            #expect(r.status == 201, "\(c.id): \(r.body)")
        }
        // What each replication has to move in all.
        func expected(_ c: Case) -> Int { c.filtered ? chosen : n }
        // Let the peer run 10 ms at a time (a duty cycle, not a wait for anything: however
        // loaded the machine, the peer gets at most that much time per step) until a fortieth
        // has moved, reading the jobs while it is frozen; then kill the daemon.
        var moved = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while moved < n * cases.count / 40 && ContinuousClock.now < deadline {
            // A blocking sleep, not Task.sleep: under a full test run the cooperative pool is
            // busy and an async sleep can overshoot by seconds, letting the peer finish.
            kill(peerPID, SIGCONT)
            usleep(10_000)
            kill(peerPID, SIGSTOP)
            let jobs = try await admin1.jobs()
            moved = jobs.values.reduce(0) { $0 + Int(($1["info"]?.objectValue?["docs_written"]?.intValue) ?? 0) }
        }
        #expect(moved >= n * cases.count / 40)
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        kill(peerPID, SIGCONT)

        // What had arrived where, before the restart: the peer's counts once it has stored
        // what was already in its sockets (two equal readings in a row).
        func peerCounts() async throws -> [String: Int] {
            var out: [String: Int] = [:]
            for c in cases {
                let (status, body) = try await curl(["\(peer.baseURL)/\(c.db)"])
                #expect(status == 200)
                out[c.db] = Int(jsonObject(body)["doc_count"]?.intValue ?? 0)
            }
            return out
        }
        var counts = try await peerCounts()
        while ContinuousClock.now < deadline + .seconds(30) {
            let again = try await peerCounts()
            if again == counts { break }
            counts = again
        }
        var remaining: [String: Int] = [:]
        var unfinished = 0
        for c in cases {
            let local = try Self.count("\(a)/\(c.db).ferry")
            let remote = counts[c.db] ?? 0
            let left: Int
            switch c.direction {
            case "push": left = expected(c) - remote
            case "pull": left = expected(c) - local
            default: left = (n - local) + (n - remote)
            }
            remaining[c.id] = left
            if left > 0 { unfinished += 1 }
        }
        #expect(unfinished >= 5, "the kill came too late to test resuming: \(remaining)")

        let daemon = try await ServeProcess(["--data", a, "--allow-anonymous"])
        let admin = try Admin(dataDirectory: a)
        let done = try await eventually(120) {
            for c in cases {
                let local = try await curl(["-H", "Authorization: Bearer \(admin.token)", "\(admin.base)/\(c.db)"])
                let remote = try await curl(["\(peer.baseURL)/\(c.db)"])
                let (l, r) = (Int(jsonObject(local.body)["doc_count"]?.intValue ?? -1), Int(jsonObject(remote.body)["doc_count"]?.intValue ?? -1))
                let ok: Bool
                switch c.direction {
                case "push": ok = r == expected(c)
                case "pull": ok = l == expected(c)
                default: ok = l == n && r == n
                }
                if !ok { return false }
            }
            let jobs = try await admin.jobs()
            return cases.filter { !$0.continuous }.allSatisfy { jobs[$0.id]?["state"]?.stringValue == "completed" }
        }
        #expect(done)
        let jobs = try await admin.jobs()
        for c in cases {
            let job = try #require(jobs[c.id])
            let session = job["info"]?.objectValue?["session"]?.objectValue ?? [:]
            let moved = Int((session["docs_pushed"]?.intValue ?? 0) + (session["docs_pulled"]?.intValue ?? 0))
            let left = remaining[c.id] ?? 0
            // Resumed from the checkpoint: at most one batch per direction again.
            let slack = batch * (c.direction == "both" ? 2 : 1)
            print("managed-replication \(c.id): \(left) left at the kill, \(moved) moved after the restart (slack \(slack))")
            #expect(moved <= left + slack, "\(c.id) moved \(moved) after the restart with \(left) left")
            #expect(moved >= left, "\(c.id) moved \(moved) after the restart with \(left) left")
            let history = (job["history"]?.arrayValue ?? []).compactMap { $0.objectValue?["type"]?.stringValue }
            #expect(history.contains("restarted"), "\(c.id): \(history)")
            #expect(history.contains("added"), "\(c.id): \(history)")
        }

        // A graceful restart: completed one-shot replications stay completed and do not run again.
        #expect(await daemon.stop() == 0)
        let third = try await ServeProcess(["--data", a, "--allow-anonymous"])
        defer { Task { await third.stop() } }
        let admin3 = try Admin(dataDirectory: a)
        let after = try await admin3.jobs()
        for c in cases where !c.continuous {
            let job = try #require(after[c.id])
            #expect(job["state"] == "completed", "\(c.id): \(job["state"] ?? "?")")
            let history = (job["history"]?.arrayValue ?? []).compactMap { $0.objectValue?["type"]?.stringValue }
            // Newest first: since it completed, only restarts (it may have completed before the kill).
            let since = history.prefix { $0 != "completed" }
            #expect(history.contains("completed") && !since.isEmpty && since.allSatisfy { $0 == "restarted" }, "\(c.id): \(history)")
        }
    }

    /// Three continuous replications of one database, running; a fourth added `exclusively`
    /// leaves it the only one, and the others no longer carry anything.
    @Test func exclusivelyLeavesExactlyOneReplicationOfTheDatabase() async throws {
        let dir = TempDir()
        let (a, b) = (dir.path("a"), dir.path("b"))
        for d in [a, b] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        try Self.fill("\(a)/x.ferry", prefix: "x", count: 10)
        try Self.fill("\(a)/y.ferry", prefix: "y", count: 10)
        for i in 1...4 { try Self.fill("\(b)/x\(i).ferry", prefix: "none", count: 0) }
        try Self.fill("\(b)/y.ferry", prefix: "none", count: 0)
        let peer = try await ServeProcess(["--data", b, "--allow-anonymous"])
        defer { Task { await peer.stop() } }
        let daemon = try await ServeProcess(["--data", a, "--allow-anonymous"])
        defer { Task { await daemon.stop() } }
        let admin = try Admin(dataDirectory: a)
        for i in 1...3 {
            let r = try await admin.call("PUT", "/_replicator/x-to-\(i)", #"{"database":"x","peer":"\#(peer.wsURL)/x\#(i)","continuous":true}"#)
            #expect(r.status == 201)
        }
        // Another database's replication is not touched.
        #expect(try await admin.call("PUT", "/_replicator/y", #"{"database":"y","peer":"\#(peer.wsURL)/y","continuous":true}"#).status == 201)
        let running = try await eventually(30) {
            let jobs = try await admin.jobs()
            return (1...3).allSatisfy { i in
                let info = jobs["x-to-\(i)"]?["info"]?.objectValue
                return jobs["x-to-\(i)"]?["state"]?.stringValue == "running" && info?["activity"]?.stringValue == "idle"
            }
        }
        #expect(running)
        // Through the CLI, which finds the daemon through DIR/_daemon.json.
        let add = try await Self.ferry(["replication", "add", "x", "\(peer.wsURL)/x4", "--id", "x-to-4", "--continuous", "--exclusively", "--data", a])
        #expect(add.status == 0, "\(add.output)")
        let jobs = try await admin.jobs()
        let ofX = jobs.values.filter { $0["database"]?.stringValue == "x" }.compactMap { $0["id"]?.stringValue }
        #expect(ofX == ["x-to-4"])
        #expect(jobs["y"] != nil)
        // A document written now reaches x4 only.
        #expect(try await curl(["-X", "PUT", "-H", "Authorization: Bearer \(admin.token)", "-d", #"{"late":true}"#, "\(admin.base)/x/late"]).status == 201)
        #expect(try await eventually(20) { try await curl(["\(peer.baseURL)/x4/late"]).status == 200 })
        for i in 1...3 { #expect(try await curl(["\(peer.baseURL)/x\(i)/late"]).status == 404) }
        // The file says the same after a restart.
        let ls = try await Self.ferry(["replication", "ls", "--data", a])
        #expect(ls.status == 0)
        #expect(!ls.output.contains("x-to-1") && ls.output.contains("x-to-4"), "\(ls.output)")
    }

    /// `ferry replication` edits the file when no daemon runs (the daemon starts what it finds),
    /// and goes through the running daemon otherwise; a second daemon on the same data refuses.
    @Test func theCommandWorksOnTheFileAndThroughTheDaemon() async throws {
        let dir = TempDir()
        let (a, b) = (dir.path("a"), dir.path("b"))
        try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
        try Self.fill("\(b)/n.ferry", prefix: "none", count: 0)
        let peer = try await ServeProcess(["--data", b, "--allow-anonymous"])
        defer { Task { await peer.stop() } }
        // No daemon yet: the command writes DIR/_replicator.json itself.
        let add = try await Self.ferry(["replication", "add", "n", "\(peer.wsURL)/n", "--id", "r", "--continuous", "--push", "--data", a])
        #expect(add.status == 0, "\(add.output)")
        #expect(add.output.contains("starts when the daemon starts"))
        let offline = try await Self.ferry(["replication", "ls", "--data", a])
        #expect(offline.output.contains("r\tinitializing\tn\tpush"), "\(offline.output)")
        #expect(try await Self.ferry(["replication", "add", "n", "\(peer.wsURL)/n", "--id", "r", "--data", a]).status == 1)

        try Self.fill("\(a)/n.ferry", prefix: "a", count: 3)
        let daemon = try await ServeProcess(["--data", a, "--allow-anonymous"])
        defer { Task { await daemon.stop() } }
        #expect(try await eventually(20) { jsonObject(try await curl(["\(peer.baseURL)/n"]).body)["doc_count"] == 3 })
        // A second daemon on the same data refuses to start, naming the first.
        let second = try await Self.ferry(["serve", "--data", a, "--port", "0", "--allow-anonymous"])
        #expect(second.status != 0)
        #expect(second.output.contains("already served by process \(daemon.process.processIdentifier)"), "\(second.output)")

        #expect(try await Self.ferry(["replication", "pause", "r", "--data", a]).status == 0)
        let shown = try await Self.ferry(["replication", "show", "r", "--data", a])
        #expect(jsonObject(shown.output)["state"] == "paused", "\(shown.output)")
        #expect(try await Self.ferry(["replication", "resume", "r", "--data", a]).status == 0)
        let json = try await Self.ferry(["replication", "ls", "--json", "--data", a])
        let jobs = (try? JSONParser.parse(Array(json.output.utf8)).arrayValue) ?? nil
        #expect(jobs?.count == 1)
        let history = (jobs?.first?.objectValue?["history"]?.arrayValue ?? []).compactMap { $0.objectValue?["type"]?.stringValue }
        #expect(history.contains("paused") && history.contains("resumed") && history.contains("restarted"), "\(history)")
        #expect(try await Self.ferry(["replication", "rm", "r", "--data", a]).status == 0)
        #expect(try await Self.ferry(["replication", "ls", "--data", a]).output.contains("no replications"))
        let missing = try await Self.ferry(["replication", "rm", "r", "--data", a])
        #expect(missing.status == 1)
        #expect(missing.output.contains("404") || missing.output.contains("no replication"), "\(missing.output)")
        // SIGUSR2 and SIGUSR1 switch the mode.
        kill(daemon.process.processIdentifier, SIGUSR2)
        #expect(try await eventually(5) { try await Self.ferry(["policy", "mode", "--data", a]).output.contains("background") })
        kill(daemon.process.processIdentifier, SIGUSR1)
        #expect(try await eventually(5) { try await Self.ferry(["policy", "mode", "--data", a]).output.contains("active") })
        #expect(try await Self.ferry(["policy", "mode", "background", "--data", a]).output.contains("background"))
    }
}
