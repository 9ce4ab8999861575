import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// The daemon as users run it: a `ferry serve --data DIR` process, driven by curl.
@Suite("ferry serve --data: many databases, BLIP and REST on one port",
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs curl (apt-get install curl)"))
struct DaemonProcessTests {
    /// Waits, with a longpoll on the same REST API, until document `id` is in `db` at `base`.
    func waitForDocument(_ base: String, _ db: String, _ id: String) async throws -> [String: JSONValue] {
        var since = "0"
        for _ in 0..<50 {
            let r = try await curl(["\(base)/\(db)/_changes?feed=longpoll&since=\(since)&timeout=10000&include_docs=true"])
            #expect(r.status == 200)
            let o = jsonObject(r.body)
            for row in o["results"]?.arrayValue ?? [] where row.objectValue?["id"]?.stringValue == id {
                return row.objectValue?["doc"]?.objectValue ?? [:]
            }
            since = o["last_seq"]?.stringValue ?? since
        }
        throw CurlFailure(reason: "\(id) never reached \(base)/\(db)")
    }

    @Test func twoDatabasesEachReplicateWithTheirOwnPeerWhileCurlReadsAndWritesBoth() async throws {
        let dir = TempDir()
        // Two peers, each serving one database file.
        let peerA = try await ServeProcess(["--db", dir.path("a.db"), "--name", "a", "--allow-anonymous"])
        let peerB = try await ServeProcess(["--db", dir.path("b.db"), "--name", "b", "--allow-anonymous"])
        // The daemon: databases alpha and beta in one directory, alpha linked with A, beta with B.
        let setup = Process()
        setup.executableURL = ServeProcess.executable
        setup.arguments = ["db", "create", "--data", dir.path("data"), "alpha"]
        try setup.run(); setup.waitUntilExit()
        let setup2 = Process()
        setup2.executableURL = ServeProcess.executable
        setup2.arguments = ["db", "create", "--data", dir.path("data"), "beta"]
        try setup2.run(); setup2.waitUntilExit()
        let daemon = try await ServeProcess(["--data", dir.path("data"), "--allow-anonymous", "--heartbeat", "5",
                                             "--replicate", "alpha=\(peerA.wsURL)/a", "--replicate", "beta=\(peerB.wsURL)/b"])
        let base = daemon.baseURL
        #expect(try await curl(["\(base)/_all_dbs"]).body == #"["alpha","beta"]"#)

        // Written over REST on the daemon's port: each reaches its own peer only.
        #expect(try await curl(["-X", "PUT", "\(base)/alpha/from-rest-a", "-d", #"{"db":"alpha"}"#]).status == 201)
        #expect(try await curl(["-X", "PUT", "\(base)/beta/from-rest-b", "-d", #"{"db":"beta"}"#]).status == 201)
        #expect(try await waitForDocument(peerA.baseURL, "a", "from-rest-a")["db"] == "alpha")
        #expect(try await waitForDocument(peerB.baseURL, "b", "from-rest-b")["db"] == "beta")
        // Written on the peers: pulled into the daemon's databases, read over REST.
        #expect(try await curl(["-X", "PUT", "\(peerA.baseURL)/a/from-peer-a", "-d", #"{"n":1}"#]).status == 201)
        #expect(try await curl(["-X", "PUT", "\(peerB.baseURL)/b/from-peer-b", "-d", #"{"n":2}"#]).status == 201)
        #expect(try await waitForDocument(base, "alpha", "from-peer-a")["n"] == 1)
        #expect(try await waitForDocument(base, "beta", "from-peer-b")["n"] == 2)
        #expect(try await curl(["\(base)/alpha/from-peer-b"]).status == 404)
        #expect(try await curl(["\(base)/beta/from-peer-a"]).status == 404)
        #expect(try await curl(["\(peerA.baseURL)/a/from-rest-b"]).status == 404)

        // A third client replicates over BLIP with the daemon on the same port: `ferry sync`.
        let client = Process()
        client.executableURL = ServeProcess.executable
        client.arguments = ["sync", "\(daemon.wsURL)/beta", "--db", dir.path("client.db"), "--pull"]
        client.standardOutput = FileHandle.nullDevice
        try client.run()
        await offPool { client.waitUntilExit() }
        #expect(client.terminationStatus == 0)
        let pulled = try Database.open(at: dir.path("client.db"))
        #expect(try pulled.document("from-peer-b") != nil && pulled.document("from-rest-b") != nil)
        pulled.close()

        #expect(await daemon.stop() == 0)
        await peerA.stop()
        await peerB.stop()
    }
}
