import FerryNet
import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Testing

/// Who may do what, over REST and BLIP alike (Protocol/rest.md, "Access control"): every
/// refusal is checked to have changed nothing.
@Suite("Access control: roles over REST and BLIP, 401s, certificates")
struct AccessControlTests {
    static let users = [
        DaemonFixture.user("rita", "r-pass", ["db": .reader]),
        DaemonFixture.user("will", "w-pass", ["db": .writer]),
        DaemonFixture.user("adam", "a-pass", ["db": .admin]),
        DaemonFixture.user("root", "s-pass", ["*": .admin]),
        DaemonFixture.user("otto", "o-pass", ["other": .writer]),
    ]
    static let reader = ("rita", "r-pass"), writer = ("will", "w-pass"), dbAdmin = ("adam", "a-pass")
    static let serverAdmin = ("root", "s-pass"), outsider = ("otto", "o-pass")

    func fixture() async throws -> DaemonFixture {
        let f = try await DaemonFixture(users: Self.users, databases: ["db", "other"])
        let db = try #require(f.daemon.registry.database("db"))
        _ = try db.save(Document(id: "seed", properties: ["v": 1]))
        return f
    }

    @Test func missingOrWrongCredentialsAre401AndReadNothing() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        for (path, user) in [("/db/seed", nil), ("/db/seed", ("rita", "wrong")), ("/db/seed", ("nobody", "x")),
                             ("/_all_dbs", nil), ("/db/_changes", nil), ("/db", ("will", ""))] as [(String, (String, String)?)] {
            let r = try await f.request("GET", path, user: user)
            #expect(r.status == 401, "\(path) as \(user?.0 ?? "anonymous")")
            #expect(r.header("WWW-Authenticate") == nil, "as CouchDB: a challenge would make browsers prompt")
            #expect(r.object["error"]?.stringValue == "unauthorized")
            #expect(!r.text.contains("seed"))
        }
        // The server's welcome is public, as CouchDB's is.
        #expect(try await f.request("GET", "/").status == 200)
    }

    @Test func aReaderReadsButCannotWrite() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let db = try #require(f.daemon.registry.database("db"))
        let before = db.lastSequence
        #expect(try await f.request("GET", "/db/seed", user: Self.reader).status == 200)
        #expect(try await f.request("GET", "/db/_all_docs", user: Self.reader).status == 200)
        #expect(try await f.request("GET", "/db/_changes", user: Self.reader).status == 200)
        #expect(try await f.request("POST", "/db/_all_docs", json: #"{"keys":["seed"]}"#, user: Self.reader).status == 200)
        let rev = try #require(try db.document("seed")?.revisionID?.description)
        let refused: [(String, String, String?)] = [
            ("PUT", "/db/new", "{}"),
            ("PUT", "/db/seed?rev=\(rev)", #"{"v":2}"#),
            ("DELETE", "/db/seed?rev=\(rev)", nil),
            ("POST", "/db", #"{"v":3}"#),
            ("POST", "/db/_bulk_docs", #"{"docs":[{"_id":"b"}]}"#),
            ("DELETE", "/db", nil),
            ("PUT", "/newdb", nil),
        ]
        for (method, path, body) in refused {
            let r = try await f.request(method, path, json: body, user: Self.reader)
            #expect(r.status == 403, "\(method) \(path)")
            #expect(r.object["error"]?.stringValue == "forbidden")
        }
        #expect(db.lastSequence == before)
        #expect(f.daemon.registry.names == ["db", "other"])
    }

    @Test func rolesBoundWhatEachMayDo() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        // A writer writes, but neither deletes the database nor creates one.
        #expect(try await f.request("PUT", "/db/w", json: "{}", user: Self.writer).status == 201)
        #expect(try await f.request("DELETE", "/db", user: Self.writer).status == 403)
        #expect(try await f.request("PUT", "/made-by-will", user: Self.writer).status == 403)
        // A database admin deletes its database but creates none.
        #expect(try await f.request("PUT", "/made-by-adam", user: Self.dbAdmin).status == 403)
        // A user with a role on another database only sees that one.
        let outsider = try await f.request("GET", "/db/seed", user: Self.outsider)
        #expect(outsider.status == 403)
        #expect(try await f.request("GET", "/_all_dbs", user: Self.outsider).json == .array(["other"]))
        // The server admin creates and deletes databases.
        #expect(try await f.request("PUT", "/made", user: Self.serverAdmin).status == 201)
        #expect(try await f.request("DELETE", "/made", user: Self.serverAdmin).status == 200)
        #expect(try await f.request("DELETE", "/db", user: Self.dbAdmin).status == 200)
        #expect(f.daemon.registry.names == ["other"])
    }

    @Test func aReaderCanPullButNotPushOverBLIP() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let served = try #require(f.daemon.registry.database("db"))
        let local = try Database.open(at: f.dir.path("local.ferry"))
        defer { local.close() }
        _ = try local.save(Document(id: "from-rita", properties: ["x": 1]))
        func replicator(_ type: ReplicatorConfiguration.ReplicatorType, _ user: (String, String)) -> Replicator {
            var c = ReplicatorConfiguration(database: local, target: f.daemon.replicationURL(for: "db"))
            c.webSocket = DaemonFixture.patientReplicationWebSocket
            c.type = type
            c.authenticator = .basic(user: user.0, password: user.1)
            c.maxAttempts = 1
            return Replicator(configuration: c)
        }
        try await replicator(.pull, Self.reader).run()
        #expect(try local.document("seed")?.properties["v"] == 1)

        let before = served.lastSequence
        let push = replicator(.push, Self.reader)
        await #expect(throws: ReplicationError.self) { try await push.run() }
        guard case .remote(let domain, let code, _)? = push.status.lastError else {
            Issue.record("expected the peer's 403, got \(String(describing: push.status.lastError))")
            return
        }
        #expect(domain == "HTTP" && code == 403)
        #expect(served.lastSequence == before)
        #expect(try served.document("from-rita") == nil)

        // Wrong password: 401 at the upgrade; no role on the database: 403 at the upgrade.
        let wrong = replicator(.pull, ("rita", "nope"))
        await #expect(throws: ReplicationError.self) { try await wrong.run() }
        if case .httpStatus(let s, _)? = wrong.status.lastError { #expect(s == 401) } else {
            Issue.record("expected 401, got \(String(describing: wrong.status.lastError))")
        }
        let stranger = replicator(.pull, Self.outsider)
        await #expect(throws: ReplicationError.self) { try await stranger.run() }
        if case .httpStatus(let s, _)? = stranger.status.lastError { #expect(s == 403) } else {
            Issue.record("expected 403, got \(String(describing: stranger.status.lastError))")
        }

        try await replicator(.push, Self.writer).run()
        #expect(try served.document("from-rita")?.properties["x"] == 1)
    }

    @Test func aClientCertificateLogsInAsItsUser() async throws {
        let pki = TestPKI()
        let id = pki.server()
        var tls = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM))
        tls.clientAuthentication = .required(trusting: .pem(pki.ca.certificatePEM))
        let carol = UserRecord(name: "carol", password: nil, roles: ["db": .reader], certificates: ["cn:carol"])
        let f = try await DaemonFixture(users: [carol], databases: ["db"], tls: tls)
        defer { Task { await f.stop() } }
        _ = try f.daemon.registry.database("db")?.save(Document(id: "seed", properties: ["v": 1]))
        let local = try Database.open(at: f.dir.path("local.ferry"))
        defer { local.close() }
        _ = try local.save(Document(id: "mine", properties: [:]))
        func replicator(_ type: ReplicatorConfiguration.ReplicatorType, as name: String) -> Replicator {
            let client = pki.client(name)
            var trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
            trust.identity = TLSIdentity(certificateChain: .pem(client.certificatePEM), privateKey: .pem(client.keyPEM))
            var c = ReplicatorConfiguration(database: local, target: f.daemon.replicationURL(for: "db").replacingOccurrences(of: "127.0.0.1", with: "localhost"))
            c.webSocket = DaemonFixture.patientReplicationWebSocket
            c.type = type
            c.tls = trust
            c.maxAttempts = 1
            return Replicator(configuration: c)
        }
        try await replicator(.pull, as: "carol").run()
        #expect(try local.document("seed") != nil)
        // Carol is a reader: her push is refused; a certificate no user has gets 401.
        await #expect(throws: ReplicationError.self) { try await replicator(.push, as: "carol").run() }
        let unknown = replicator(.pull, as: "mallory")
        await #expect(throws: ReplicationError.self) { try await unknown.run() }
        if case .httpStatus(let s, _)? = unknown.status.lastError { #expect(s == 401) } else {
            Issue.record("expected 401, got \(String(describing: unknown.status.lastError))")
        }
        #expect(try f.daemon.registry.database("db")?.document("mine") == nil)
    }
}
