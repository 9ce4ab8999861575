import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// `/_replicator`, `/_replicate` and `/_scheduler` on in-process daemons (Protocol/replicator.md).
@Suite("Managed replications: the REST API")
struct ReplicatorRoutesTests {
    static let admin = DaemonFixture.user("root", "pw", ["*": .admin])
    static let writer = DaemonFixture.user("ann", "pw", ["alpha": .writer])
    static let root = ("root", "pw")

    static func job(_ f: DaemonFixture, _ id: String) async throws -> [String: JSONValue] {
        try await f.request("GET", "/_scheduler/jobs/\(id)", user: root).object
    }

    static func history(_ job: [String: JSONValue]) -> [String] {
        (job["history"]?.arrayValue ?? []).compactMap { $0.objectValue?["type"]?.stringValue }
    }

    @Test func onlyServerAdminsSeeReplications() async throws {
        let f = try await DaemonFixture(users: [Self.admin, Self.writer], databases: ["alpha"])
        defer { Task { await f.stop() } }
        #expect(try await f.request("GET", "/_scheduler/jobs").status == 401)
        #expect(try await f.request("GET", "/_scheduler/jobs", user: ("ann", "pw")).status == 403)
        #expect(try await f.request("PUT", "/_replicator/r", json: #"{"database":"alpha","peer":"ws://127.0.0.1:1/alpha"}"#,
                                    user: ("ann", "pw")).status == 403)
        #expect(try await f.request("GET", "/_scheduler/jobs", user: Self.root).status == 200)
        // The token in DIR/_daemon.json (mode 0600) is an admin's; a wrong one is refused.
        let endpoint = jsonObject(try String(contentsOfFile: f.dir.path("data") + "/_daemon.json", encoding: .utf8))
        let token = try #require(endpoint["token"]?.stringValue)
        #expect(try await f.request("GET", "/_scheduler/jobs", headers: [("Authorization", "Bearer \(token)")]).status == 200)
        #expect(try await f.request("GET", "/_scheduler/jobs", headers: [("Authorization", "Bearer x\(token.dropFirst())")]).status == 401)
        let mode = try FileManager.default.attributesOfItem(atPath: f.dir.path("data") + "/_daemon.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func documentsHaveRevisionsAndWriteOnlyCredentials() async throws {
        let f = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await f.stop() } }
        // A peer that is not there: the replication crashes and retries, which is fine here.
        let doc = #"{"source":"alpha","target":"http://bob:s3cret@127.0.0.1:9/alpha","continuous":true}"#
        let put = try await f.request("PUT", "/_replicator/r1", json: doc, user: Self.root)
        #expect(put.status == 201)
        let rev1 = try #require(put.object["rev"]?.stringValue)
        #expect(rev1.hasPrefix("1-"))
        let get = try await f.request("GET", "/_replicator/r1", user: Self.root)
        #expect(get.status == 200)
        #expect(get.object["_rev"]?.stringValue == rev1)
        #expect(get.object["peer"] == "http://127.0.0.1:9/alpha", "the scheme is kept: it picks the protocol")
        #expect(get.object["direction"] == "push")
        #expect(get.object["auth"] == .object(["basic": .object(["username": "bob", "password": "***"])]))
        #expect(!get.text.contains("s3cret"))
        #expect(!(try await f.request("GET", "/_scheduler/jobs", user: Self.root)).text.contains("s3cret"))
        // The file keeps the password, readable by its owner only.
        let file = f.dir.path("data") + "/_replicator.json"
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("s3cret"))
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)

        // CouchDB's rules: an update needs the current _rev.
        #expect(try await f.request("PUT", "/_replicator/r1", json: doc, user: Self.root).status == 409)
        // A document read back (password "***") and written again keeps the stored password.
        var back = get.object
        back["continuous"] = false
        let put2 = try await f.request("PUT", "/_replicator/r1", json: String(decoding: CanonicalJSON.encode(.object(back)), as: UTF8.self), user: Self.root)
        #expect(put2.status == 201)
        let rev2 = try #require(put2.object["rev"]?.stringValue)
        #expect(rev2.hasPrefix("2-"))
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("s3cret"))
        #expect(Self.history(try await Self.job(f, "r1")).contains("updated"))

        let all = try await f.request("GET", "/_replicator/_all_docs", user: Self.root)
        #expect(all.object["total_rows"] == 1)
        #expect(try await f.request("DELETE", "/_replicator/r1", user: Self.root).status == 409)
        #expect(try await f.request("DELETE", "/_replicator/r1?rev=\(rev1)", user: Self.root).status == 409)
        #expect(try await f.request("DELETE", "/_replicator/r1?rev=\(rev2)", user: Self.root).status == 200)
        #expect(try await f.request("GET", "/_replicator/r1", user: Self.root).status == 404)
        #expect(try await f.request("GET", "/_scheduler/jobs/r1", user: Self.root).status == 404)
    }

    @Test(arguments: [
        (#"{"database":"alpha"}"#, "database and peer"),
        (#"{"source":"alpha","target":"beta"}"#, "peer URL"),
        (#"{"source":"ws://a:1/x","target":"ws://b:1/y"}"#, "local database"),
        (#"{"database":"alpha","peer":"ftp://x/y"}"#, "not a peer URL"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","direction":"sideways"}"#, "direction"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","schedule":{"every":"soon"}}"#, "schedule.every"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","download":[{"contentype":"text/*"}]}"#, "unknown key"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","tls_pins":["abc"]}"#, "SHA-256"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","batch_size":0}"#, "batch_size"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","schedule":{"every":1,"budget":1e300}}"#, "365 days"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","schedule":{"every":1,"background_every":0}}"#, "background_every"),
        (#"{"database":"alpha","peer":"ws://h:1/alpha","heartbeat":0.001}"#, "heartbeat"),
        (#"{"database":"alpha","peer":"ws://u@h:1/alpha"}"#, "without a password"),
    ])
    func badDocumentsAreRefusedWithAReason(_ doc: String, _ reason: String) async throws {
        let f = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await f.stop() } }
        let r = try await f.request("PUT", "/_replicator/bad", json: doc, user: Self.root)
        #expect(r.status == 400)
        #expect(r.object["error"] == "bad_request")
        #expect(r.object["reason"]?.stringValue?.contains(reason) == true, "\(r.text)")
        #expect(try await f.request("GET", "/_scheduler/jobs", user: Self.root).object["total_rows"] == 0)
    }

    /// `POST /_replicate` runs a one-shot replication to its end and answers with what it did;
    /// a pushed document is then on the peer. A continuous one is cancelled by its ID.
    @Test func replicateRunsAOneOffAndCancelsAContinuousOne() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        for i in 0..<5 { #expect(try await a.request("PUT", "/alpha/d\(i)", json: #"{"i":\#(i)}"#, user: Self.root).status == 201) }
        let target = "http://127.0.0.1:\(b.daemon.port)/beta"
        let r = try await a.request("POST", "/_replicate", json: #"{"source":"alpha","target":"\#(target)"}"#, user: Self.root)
        #expect(r.status == 200, "\(r.text)")
        #expect(r.object["ok"] == true)
        #expect(r.object["history"]?.arrayValue?.first?.objectValue?["docs_written"] == 5)
        #expect(try await b.request("GET", "/beta/d4").status == 200)
        #expect(try await a.request("GET", "/_scheduler/jobs", user: Self.root).object["total_rows"] == 0)

        let c = try await a.request("POST", "/_replicate", json: #"{"source":"alpha","target":"\#(target)","continuous":true}"#, user: Self.root)
        #expect(c.status == 202)
        let id = try #require(c.object["_local_id"]?.stringValue)
        #expect(try await a.request("GET", "/_scheduler/jobs/\(id)", user: Self.root).object["transient"] == true)
        #expect(try await a.request("PUT", "/alpha/late", json: "{}", user: Self.root).status == 201)
        #expect(try await eventually { try await b.request("GET", "/beta/late").status == 200 })
        let cancel = try await a.request("POST", "/_replicate", json: #"{"replication_id":"\#(id)","cancel":true}"#, user: Self.root)
        #expect(cancel.status == 200)
        #expect(try await a.request("GET", "/_scheduler/jobs/\(id)", user: Self.root).status == 404)

        let waiting = try await a.request("POST", "/_replicate", json: #"{"source":"alpha","target":"\#(target)","conditions":{"reachable":true}}"#, user: Self.root)
        #expect(waiting.status == 400)
        for (id, status) in [("_all_docs", 405), ("_replicate-x", 400), ("a%2Fb", 400)] {
            #expect(try await a.request("PUT", "/_replicator/\(id)", json: #"{"database":"alpha","peer":"\#(target)"}"#, user: Self.root).status == status, "\(id)")
        }
        #expect(try await a.request("POST", "/_replicator", json: #"{"_id":"","database":"alpha","peer":"\#(target)"}"#, user: Self.root).status == 400)

        let unreachable = try await a.request("POST", "/_replicate", json: #"{"source":"alpha","target":"ws://127.0.0.1:9/x"}"#, user: Self.root)
        #expect(unreachable.status == 404)
        #expect(unreachable.object["error"] == "db_not_found")
    }

    /// The jobs show CouchDB's fields and Ferry's state; pausing and resuming are recorded,
    /// and a paused replication carries nothing.
    @Test func jobsPauseAndResume() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        let doc = #"{"database":"alpha","peer":"ws://127.0.0.1:\#(b.daemon.port)/beta","continuous":true}"#
        #expect(try await a.request("PUT", "/_replicator/r", json: doc, user: Self.root).status == 201)
        #expect(try await a.request("PUT", "/alpha/one", json: "{}", user: Self.root).status == 201)
        #expect(try await eventually { try await b.request("GET", "/beta/one").status == 200 })
        var job = try await Self.job(a, "r")
        for key in ["id", "doc_id", "database", "source", "target", "state", "start_time", "info", "history", "node"] {
            #expect(job[key] != nil, "job lacks \(key)")
        }
        #expect(job["state"] == "running")
        #expect(job["info"]?.objectValue?["docs_written"] == 1)
        #expect(Self.history(job).last == "added")

        #expect(try await a.request("POST", "/_replicator/r/_pause", user: Self.root).status == 200)
        job = try await Self.job(a, "r")
        #expect(job["state"] == "paused")
        #expect(try await a.request("PUT", "/alpha/two", json: "{}", user: Self.root).status == 201)
        #expect(try await a.request("POST", "/_replicator/r/_resume", user: Self.root).status == 200)
        #expect(try await eventually { try await b.request("GET", "/beta/two").status == 200 })
        job = try await Self.job(a, "r")
        #expect(Array(Self.history(job).prefix(3)).contains("resumed"))
        #expect(Self.history(job).contains("paused"))
        let docs = try await a.request("GET", "/_scheduler/docs", user: Self.root)
        #expect(docs.object["docs"]?.arrayValue?.first?.objectValue?["database"] == "_replicator")
        #expect(try await a.request("POST", "/_replicator/nope/_pause", user: Self.root).status == 404)
    }

    /// `create_target: true` makes a missing local target first (CouchDB's option), with
    /// `create_target_params.conflict_policy`; a bad parameter is 400 and makes nothing; in a
    /// push the target is the peer, and nothing local is made.
    @Test func createTargetMakesTheLocalDatabaseWithItsPolicy() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        #expect(try await b.request("PUT", "/beta/one", json: "{}").status == 201)
        let source = "http://127.0.0.1:\(b.daemon.port)/beta"
        let bad = try await a.request("POST", "/_replicate", json: #"{"source":"\#(source)","target":"fresh","create_target":true,"create_target_params":{"conflict_policy":"merge"}}"#, user: Self.root)
        #expect(bad.status == 400 && bad.text.contains("conflict_policy"), "\(bad.text)")
        #expect(try await a.request("GET", "/fresh", user: Self.root).status == 404)
        let r = try await a.request("POST", "/_replicate", json: #"{"source":"\#(source)","target":"fresh","create_target":true,"create_target_params":{"conflict_policy":"keep"}}"#, user: Self.root)
        #expect(r.status == 200, "\(r.text)")
        let info = try await a.request("GET", "/fresh", user: Self.root)
        #expect(info.object["conflict_policy"] == "keep")
        #expect(try await a.request("GET", "/fresh/one", user: Self.root).status == 200)
        // Again, now that it exists: nothing to make, the replication runs.
        #expect(try await a.request("POST", "/_replicate", json: #"{"source":"\#(source)","target":"fresh","create_target":true}"#, user: Self.root).status == 200)
        // A push: the target is the peer; no local database appears under its name.
        let push = try await a.request("POST", "/_replicate", json: #"{"source":"alpha","target":"http://127.0.0.1:\#(b.daemon.port)/gamma","create_target":true}"#, user: Self.root)
        #expect(push.status == 404, "\(push.text)")
        #expect(try await a.request("GET", "/gamma", user: Self.root).status == 404)
    }

    /// A periodic replication runs again after its period, within its budget, and the mode
    /// switches its period.
    @Test func periodicRunsAndTheModeSwitchesThePeriod() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        let doc = #"{"database":"alpha","peer":"ws://127.0.0.1:\#(b.daemon.port)/beta","schedule":{"every":"1s","background_every":"1h","budget":"60s"}}"#
        // The budget is generous: what is tested here is the period, and under a full parallel
        // test run beside a CPU hog one document can take seconds to move (the budget's own
        // bound is checked with real processes in Tests/Replications).
        #expect(try await a.request("PUT", "/_replicator/p", json: doc, user: Self.root).status == 201)
        #expect(try await a.request("PUT", "/alpha/first", json: "{}", user: Self.root).status == 201)
        #expect(try await eventually(120) { try await b.request("GET", "/beta/first").status == 200 })
        // Runs again after its period. Under a loaded CI a run may end at its budget, or lose
        // its connection and record `crashed` while it retries inside the run, so a second
        // `started` after a finished run is what shows the period at work.
        #expect(try await eventually(120) {
            let events = Self.history(try await Self.job(a, "p"))
            return events.filter { $0 == "started" }.count >= 2 && events.contains { $0 == "completed" || $0 == "budget" }
        })
        // One `started` per run: every finished run was started, and no run was started twice.
        // (`crashed` may also be recorded inside a run that then goes on, so it only loosens
        // the upper bound.)
        let events = Self.history(try await Self.job(a, "p"))
        let finished = events.filter { $0 == "completed" || $0 == "budget" }.count
        let crashed = events.filter { $0 == "crashed" }.count
        #expect((finished...(finished + crashed + 1)).contains(events.filter { $0 == "started" }.count), "\(events)")
        #expect(try await a.request("PUT", "/_scheduler/mode", json: #"{"mode":"background"}"#, user: Self.root).object["mode"] == "background")
        // In background mode the next run is an hour away.
        #expect(try await eventually { try await Self.job(a, "p")["state"] == "pending" })
        let runs = Self.history(try await Self.job(a, "p")).filter { $0 == "started" }.count
        #expect(try await a.request("PUT", "/alpha/second", json: "{}", user: Self.root).status == 201)
        #expect(try await a.request("PUT", "/_scheduler/mode", json: #"{"mode":"active"}"#, user: Self.root).status == 200)
        #expect(try await eventually { try await b.request("GET", "/beta/second").status == 200 })
        #expect(Self.history(try await Self.job(a, "p")).filter { $0 == "started" }.count > runs)
        #expect(try await a.request("PUT", "/_scheduler/mode", json: #"{"mode":"idle"}"#, user: Self.root).status == 400)
    }

    /// An interface condition: no run while the named interface does not exist or is down;
    /// `lo` is up.
    @Test func anInterfaceConditionHoldsRunsBack() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        #expect(try await a.request("PUT", "/alpha/x", json: "{}", user: Self.root).status == 201)
        let peer = "ws://127.0.0.1:\(b.daemon.port)/beta"
        #expect(try await a.request("PUT", "/_replicator/wifi", json: #"{"database":"alpha","peer":"\#(peer)","conditions":{"interfaces":["ferrynone0"]}}"#, user: Self.root).status == 201)
        #expect(try await eventually { try await Self.job(a, "wifi")["state"] == "pending" })
        let job = try await Self.job(a, "wifi")
        #expect((job["history"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue ?? "").contains("ferrynone0"))
        #expect(try await b.request("GET", "/beta/x").status == 404)
        #expect(try await a.request("PUT", "/_replicator/lo", json: #"{"database":"alpha","peer":"\#(peer)","conditions":{"interfaces":["lo"],"reachable":true}}"#, user: Self.root).status == 201)
        #expect(try await eventually { try await Self.job(a, "lo")["state"] == "completed" })
        #expect(try await b.request("GET", "/beta/x").status == 200)
    }

    /// A replication document's `conflicts` decides a pulled conflict (two creations of `doc`,
    /// one on each side): `local` keeps this database's body, `remote` the peer's; either way
    /// no conflict is left.
    @Test(arguments: [("local", "alpha"), ("remote", "beta")])
    func theConflictsSettingDecidesAPulledConflict(_ policy: String, winner: String) async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        #expect(try await a.request("PUT", "/alpha/doc", json: #"{"who":"alpha"}"#, user: Self.root).status == 201)
        #expect(try await b.request("PUT", "/beta/doc", json: #"{"who":"beta"}"#).status == 201)
        let doc = #"{"database":"alpha","peer":"ws://127.0.0.1:\#(b.daemon.port)/beta","direction":"pull","conflicts":"\#(policy)"}"#
        #expect(try await a.request("PUT", "/_replicator/c", json: doc, user: Self.root).status == 201)
        #expect(try await eventually { try await Self.job(a, "c")["state"] == "completed" })
        let db = try #require(a.daemon.registry.database("alpha"))
        #expect(try await eventually { try db.conflictingRevisions(of: "doc").isEmpty })
        #expect(try db.document("doc")?["who"] == .string(winner))
    }

    /// A replication document's `download` rules reach the pull: a small text attachment
    /// arrives, one over 1 MiB stays unfetched with its metadata.
    @Test func downloadRulesOfADocumentShapeThePull() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        let rev = try #require(try await b.request("PUT", "/beta/doc", json: "{}").object["rev"]?.stringValue)
        let small = try await b.request("PUT", "/beta/doc/note.txt?rev=\(rev)", body: Array("hello".utf8), headers: [("Content-Type", "text/plain")])
        let rev2 = try #require(small.object["rev"]?.stringValue)
        let big = [UInt8](repeating: 7, count: (1 << 20) + 10)
        #expect(try await b.request("PUT", "/beta/doc/big.bin?rev=\(rev2)", body: big, headers: [("Content-Type", "application/octet-stream")]).status == 201)
        let doc = #"{"database":"alpha","peer":"ws://127.0.0.1:\#(b.daemon.port)/beta","direction":"pull","download":[{"minLength":"1MiB","skip":true},{"contentType":"text/*","priority":10}]}"#
        #expect(try await a.request("PUT", "/_replicator/dl", json: doc, user: Self.root).status == 201)
        #expect(try await eventually { try await Self.job(a, "dl")["state"] == "completed" })
        let db = try #require(a.daemon.registry.database("alpha"))
        let pulled = try #require(try db.document("doc"))
        let atts = Dictionary(uniqueKeysWithValues: try db.attachments(of: pulled).map { ($0.name, $0) })
        #expect(atts["note.txt"]?.isFetched == true)
        #expect(atts["big.bin"]?.isFetched == false)
        #expect(atts["big.bin"]?.length == Int64(big.count))
    }

    /// Documents the peer's validation refuses are listed in the job, one by one, with the
    /// reason; the replication completes with the others.
    @Test func documentFailuresAreListedWithTheirReasons() async throws {
        let a = try await DaemonFixture(users: [Self.admin], databases: ["alpha"])
        defer { Task { await a.stop() } }
        let b = try await DaemonFixture(allowAnonymous: true, databases: ["beta"])
        defer { Task { await b.stop() } }
        let beta = try #require(b.daemon.registry.database("beta"))
        beta.setValidation(named: "no-bad") { rev, _ in
            rev.properties["bad"] == .bool(true) ? .reject(message: "bad documents are refused here") : .accept
        }
        for i in 0..<4 { #expect(try await a.request("PUT", "/alpha/ok-\(i)", json: "{}", user: Self.root).status == 201) }
        for i in 0..<2 { #expect(try await a.request("PUT", "/alpha/bad-\(i)", json: #"{"bad":true}"#, user: Self.root).status == 201) }
        let doc = #"{"database":"alpha","peer":"ws://127.0.0.1:\#(b.daemon.port)/beta","direction":"push"}"#
        #expect(try await a.request("PUT", "/_replicator/v", json: doc, user: Self.root).status == 201)
        #expect(try await eventually { try await Self.job(a, "v")["state"] == "completed" })
        let info = try #require(try await Self.job(a, "v")["info"]?.objectValue)
        #expect(info["docs_pushed"] == 4)
        #expect(info["doc_write_failures"] == 2)
        let failures = (info["failures"]?.arrayValue ?? []).compactMap(\.objectValue)
        #expect(Set(failures.compactMap { $0["doc_id"]?.stringValue }) == ["bad-0", "bad-1"])
        #expect(failures.allSatisfy { ($0["reason"]?.stringValue ?? "").contains("bad documents are refused here") }, "\(failures)")
        #expect(failures.allSatisfy { $0["time"]?.stringValue != nil })
        let lastError = info["error"]?.stringValue ?? ""
        #expect(lastError.hasPrefix("bad-"))
    }
}
