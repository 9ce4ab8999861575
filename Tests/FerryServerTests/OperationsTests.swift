import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import FerryWebSocket
import Foundation
import Testing

/// `GET /_up` and `GET /_metrics` on an in-process daemon (docs/daemon.md).
@Suite("Operations: /_up and /_metrics")
struct OperationsTests {
    static let admin = DaemonFixture.user("root", "pw", ["*": .admin])
    static let reader = DaemonFixture.user("ann", "pw", ["alpha": .reader])

    @Test func upIsPublicAndListsDatabasesAndReplications() async throws {
        let f = try await DaemonFixture(users: [Self.admin], databases: ["alpha", "beta"])
        defer { Task { await f.stop() } }
        _ = f.daemon.replications.link(target: "ws://peer.example:4984/alpha", database: "alpha")
        let r = try await f.request("GET", "/_up")
        #expect(r.status == 200)
        #expect(r.object["status"] == "ok")
        #expect(r.object["databases"] == .object(["alpha": .object(["status": "online"]), "beta": .object(["status": "online"])]))
        let reps = r.object["replications"]?.arrayValue ?? []
        #expect(reps.count == 1)
        #expect(reps.first?.objectValue?["target"] == "ws://peer.example:4984/alpha")
        #expect(reps.first?.objectValue?["database"] == "alpha")
        #expect(reps.first?.objectValue?["state"] == "stopped")
        #expect(try await f.request("POST", "/_up", json: "{}").status == 405)
    }

    @Test func metricsAreForServerAdminsOnly() async throws {
        let f = try await DaemonFixture(users: [Self.admin, Self.reader], databases: ["alpha"])
        defer { Task { await f.stop() } }
        let none = try await f.request("GET", "/_metrics")
        #expect(none.status == 401)
        #expect(none.object["error"] == "unauthorized")
        let reader = try await f.request("GET", "/_metrics", user: ("ann", "pw"))
        #expect(reader.status == 403)
        #expect(reader.object["error"] == "forbidden")
        let admin = try await f.request("GET", "/_metrics", user: ("root", "pw"))
        #expect(admin.status == 200)
        #expect(admin.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        #expect(admin.text.contains("ferry_database_documents{db=\"alpha\"} 0"))

        let anonymousAdmin = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin)
        defer { Task { await anonymousAdmin.stop() } }
        #expect(try await anonymousAdmin.request("GET", "/_metrics").status == 200)
        let anonymousWriter = try await DaemonFixture(allowAnonymous: true, anonymousRole: .writer)
        defer { Task { await anonymousWriter.stop() } }
        #expect(try await anonymousWriter.request("GET", "/_metrics").status == 403)
    }

    /// A push of 25 documents from this process, registered as a link, and some REST traffic:
    /// the scrape's counters match what was done, checked by Prometheus' own parser where
    /// .venv has it (scripts/test) and by the lines here in any case.
    @Test func metricsCountWhatWasDone() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin, databases: ["alpha"])
        defer { Task { await f.stop() } }
        for i in 0..<3 { #expect(try await f.request("PUT", "/alpha/rest-\(i)", json: #"{"n":\#(i)}"#).status == 201) }
        #expect(try await f.request("GET", "/alpha/rest-0").status == 200)
        #expect(try await f.request("GET", "/alpha/missing").status == 404)
        #expect(try await f.request("GET", "/alpha/_all_docs").status == 200)

        let local = try Database.open(at: f.dir.path("local.ferry"))
        try local.inBatch { (b) throws(StoreError) in
            for i in 0..<25 { try b.save(Document(id: "doc-\(i)", properties: ["i": .int(Int64(i))])) }
        }
        let target = f.daemon.replicationURL(for: "alpha")
        var c = ReplicatorConfiguration(database: local, target: target)
        c.type = .push
        let replicator = Replicator(configuration: c)
        let link = f.daemon.replications.link(target: target, database: "alpha")
        link.attach(replicator)
        try await replicator.run()
        #expect(link.snapshot.documentsPushed == 25)

        let scrape = try await f.request("GET", "/_metrics")
        #expect(scrape.status == 200)
        let expected = [
            #"ferry_http_requests_total{route="document",method="PUT",status="201"}=3"#,
            #"ferry_http_requests_total{route="document",method="GET",status="200"}=1"#,
            #"ferry_http_requests_total{route="document",method="GET",status="404"}=1"#,
            #"ferry_http_requests_total{route="all_docs",method="GET",status="200"}=1"#,
            #"ferry_database_documents{db="alpha"}=28"#,
            #"ferry_database_deleted_documents{db="alpha"}=0"#,
            #"ferry_database_conflicts{db="alpha"}=0"#,
            #"ferry_replication_documents_pushed_total{target="\#(target)",db="alpha"}=25"#,
            #"ferry_replication_documents_pulled_total{target="\#(target)",db="alpha"}=0"#,
            #"ferry_replication_state{target="\#(target)",db="alpha",state="stopped"}=1"#,
            #"ferry_replication_state{target="\#(target)",db="alpha",state="busy"}=0"#,
            #"ferry_blip_revisions_received_total=25"#,
            #"ferry_blip_connections_total=1"#,
        ]
        let lines = Set(scrape.text.split(separator: "\n").map(String.init))
        for e in expected {
            // The text format writes gauges as doubles ("28.0") and counters as integers.
            let eq = try #require(e.lastIndex(of: "="))
            let (sample, value) = (String(e[..<eq]), String(e[e.index(after: eq)...]))
            #expect(lines.contains("\(sample) \(value)") || lines.contains("\(sample) \(value).0"), "\(e) in\n\(scrape.text)")
        }
        // Errors are counted (a busy machine may see a handshake time out and be retried).
        #expect(scrape.text.contains(#"ferry_replication_errors_total{target="\#(target)",db="alpha"} "#))
        #expect(scrape.text.contains("ferry_http_received_bytes_total "))
        #expect(scrape.text.contains(#"ferry_open_connections{protocol="http"} 1.0"#))

        // The same expectations through prometheus_client's parser.
        let python = ProcessInfo.processInfo.environment["FERRY_PYTHON"] ?? packageRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else { return }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: python)
        probe.arguments = ["-c", "import prometheus_client.parser"]
        probe.standardError = FileHandle.nullDevice
        try probe.run()
        await offPool { probe.waitUntilExit() }
        guard probe.terminationStatus == 0 else { return }
        let file = f.dir.path("scrape.txt")
        try Data(scrape.body).write(to: URL(fileURLWithPath: file))
        let check = Process()
        check.executableURL = URL(fileURLWithPath: python)
        check.arguments = [packageRoot.appendingPathComponent("Tests/REST/check_metrics.py").path, file] + expected
        let out = Pipe()
        check.standardOutput = out
        try check.run()
        let report = await offPool { String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        await offPool { check.waitUntilExit() }
        #expect(check.terminationStatus == 0, "\(report)")
    }

    @Test func routesAreFewAndFixed() {
        #expect(DaemonMetrics.route(of: []) == .server)
        #expect(DaemonMetrics.route(of: ["_all_dbs"]) == .server)
        #expect(DaemonMetrics.route(of: ["db"]) == .database)
        #expect(DaemonMetrics.route(of: ["db", "doc"]) == .document)
        #expect(DaemonMetrics.route(of: ["db", "doc", "att.png"]) == .attachment)
        #expect(DaemonMetrics.route(of: ["db", "_changes"]) == .changes)
        #expect(DaemonMetrics.route(of: ["db", "_bulk_docs"]) == .bulk_docs)
        #expect(DaemonMetrics.route(of: ["db", "_all_docs"]) == .all_docs)
        #expect(DaemonMetrics.route(of: ["db", "_local", "x"]) == .other)
    }

    /// The daemon's stop closes a replication client with WebSocket 1001 (going away), which
    /// tells a client the server is leaving rather than refusing it.
    @Test func stopClosesReplicationClientsWithGoingAway() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin, databases: ["alpha"])
        var ws = WebSocketConfiguration()
        ws.subprotocols = ["BLIP_3+CBMobile_3"]
        // The upgrade is authorized on the cooperative pool, which a full test run beside a CPU
        // hog keeps busy for many seconds: the default 10 s handshake ran out in CI.
        ws.handshakeTimeout = 120
        let client = try await WebSocket.connect(to: f.daemon.replicationURL(for: "alpha") + "/_blipsync", configuration: ws)
        await f.stop()
        let info = await client.closed()
        #expect(info.code == .goingAway, "\(info)")
        #expect(info.reason == "server shutting down")
        #expect(f.daemon.httpConnections.openConnections == 0)
    }
}
