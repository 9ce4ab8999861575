import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// A daemon with one database, `notes`, replicating with a peer (`--replicate`): what
/// `ferry status` is pointed at in the process and terminal tests.
struct StatusFixture {
    let dir = TempDir()
    let peer: ServeProcess
    let daemon: ServeProcess
    /// The daemon's data directory.
    var data: String { dir.path("data") }
    /// The peer's database URL, as the replication shows it.
    var peerURL: String { "\(peer.wsURL)/notes" }

    init() async throws {
        peer = try await ServeProcess(["--db", dir.path("peer.db"), "--name", "notes", "--allow-anonymous"])
        let create = try await runFerry(["db", "create", "--data", dir.path("data"), "notes"])
        guard create.status == 0 else { throw CurlFailure(reason: "ferry db create: \(create.err)") }
        daemon = try await ServeProcess(["--data", dir.path("data"), "--allow-anonymous", "--replicate", "notes=\(peer.wsURL)/notes"])
    }

    /// Writes `count` documents to the daemon's `notes` over REST, IDs `prefix0`, `prefix1`, ….
    func write(_ count: Int, prefix: String) async throws {
        let docs = (0..<count).map { #"{"_id":"\#(prefix)\#($0)","n":\#($0)}"# }.joined(separator: ",")
        let r = try await curl(["-X", "POST", "-H", "Content-Type: application/json", "\(daemon.baseURL)/notes/_bulk_docs",
                                "-d", #"{"docs":[\#(docs)]}"#])
        guard r.status == 201 else { throw CurlFailure(reason: "_bulk_docs answered \(r.status): \(r.body)") }
    }

    func stop() async {
        await daemon.stop()
        await peer.stop()
    }

    /// Runs `body` with a fixture and stops both processes afterwards, also when `body` throws
    /// (a failed test must not leave daemons running).
    static func with(_ body: (StatusFixture) async throws -> Void) async throws {
        let f = try await StatusFixture()
        do { try await body(f) } catch {
            await f.stop()
            throw error
        }
        await f.stop()
    }
}

/// `ferry status` outside a terminal: `--json` for scripts, one plain snapshot in a pipe, and
/// exit status 3 when no daemon runs.
@Suite("ferry status: --json, pipes and a daemon that is not running",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs curl (apt-get install curl)"))
struct StatusCommandTests {
    @Test func jsonHasTheDatabasesAndTheReplicationJob() async throws {
        try await StatusFixture.with { f in
            try await f.write(3, prefix: "j")
            let r = try await runFerry(["status", "--data", f.data, "--json"])
            #expect(r.status == 0, "\(r.err)")
            let o = try JSONParser.parseObject(Array(r.out.utf8))
            #expect(Set(o.keys) == ["databases", "replications"])
            let db = o["databases"]?.arrayValue?.first?.objectValue
            #expect(db?["db_name"] == "notes")
            #expect(db?["doc_count"] == 3)
            let jobs = o["replications"]?.arrayValue ?? []
            #expect(jobs.count == 1)
            let job = jobs.first?.objectValue
            #expect(job?["database"] == "notes")
            #expect(job?["target"]?.stringValue == f.peerURL || job?["source"]?.stringValue == f.peerURL)
            #expect(job?["state"]?.stringValue != nil && job?["info"]?.objectValue != nil)
        }
    }

    @Test func inAPipeItPrintsOnePlainSnapshot() async throws {
        try await StatusFixture.with { f in
            let r = try await runFerry(["status", "--data", f.data])
            #expect(r.status == 0, "\(r.err)")
            let lines = r.out.components(separatedBy: "\n")
            #expect(lines.first?.hasPrefix("ferry status  \(f.daemon.baseURL)") == true)
            #expect(lines.contains("DATABASES (1)") && lines.contains("REPLICATIONS (1)") && lines.contains("RECENT ERRORS"))
            #expect(lines.contains { $0.hasPrefix("notes ") })
            #expect(lines.contains { $0.contains(f.peerURL) && $0.contains("both") })
            #expect(!r.out.contains("\u{1B}"), "escape codes in a pipe: \(r.out.debugDescription)")
        }
    }

    @Test func noDaemonIsExitStatus3WithAMessage() async throws {
        let dir = TempDir()
        let never = try await runFerry(["status", "--data", dir.path("nothing-here"), "--json"])
        #expect(never.status == 3)
        #expect(never.out.isEmpty && never.err.contains("no daemon"), "\(never.err)")

        // A daemon that ran and stopped.
        let f = try await StatusFixture()
        await f.stop()
        let stopped = try await runFerry(["status", "--data", f.data, "--json"])
        #expect(stopped.status == 3, "\(stopped.out) \(stopped.err)")
        #expect(stopped.out.isEmpty && stopped.err.hasPrefix("ferry: "), "\(stopped.err)")

        // At a URL where nothing listens.
        let nowhere = try await runFerry(["status", "--url", f.daemon.baseURL])
        #expect(nowhere.status == 3, "\(nowhere.err)")
    }
}
