import FerryBLIP
import FerryStore
@testable import FerrySync
import FerryWebSocket
import Testing

@Suite("Authentication, retries and bad input")
struct ResilienceTests {
    @Test func wrongOrMissingCredentialsStopWith401AndTouchNothing() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true, credentials: ("naomi", "s3cret"))
        try molly.put("m", ["v": 1])
        try naomi.put("n", ["v": 1])
        let naomiBefore = naomi.db.lastSequence
        for auth in [nil, ReplicatorConfiguration.Authenticator.basic(user: "naomi", password: "wrong")] {
            var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
            c.authenticator = auth
            let r = Replicator(configuration: c)
            await #expect { try await r.run() } throws: { error in
                guard case ReplicationError.httpStatus(401, _) = error else { return false }
                return true
            }
            #expect(r.status.activity == .stopped)
        }
        #expect(try molly.db.document("n") == nil)
        #expect(naomi.db.lastSequence == naomiBefore)
        #expect(try naomi.db.document("m") == nil)

        try await replicate(molly, with: naomi) { c in c.authenticator = .basic(user: "naomi", password: "s3cret") }
        #expect(try molly.body("n") == ["v": 1] && naomi.body("m") == ["v": 1])
        await molly.stop(); await naomi.stop()
    }

    /// Credentials written in the target URL are used (and taken out of it); an explicit
    /// authenticator wins over them; wrong ones are a 401 like any other.
    @Test func credentialsInTheURLAreUsed() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true, credentials: ("naomi", "s3cret"))
        try naomi.put("n", ["v": 1])
        func url(_ userInfo: String) -> String { naomi.url.replacingOccurrences(of: "ws://", with: "ws://\(userInfo)@") }

        let wrong = Replicator(configuration: ReplicatorConfiguration(database: molly.db, target: url("naomi:nope")))
        await #expect { try await wrong.run() } throws: { error in
            guard case ReplicationError.httpStatus(401, _) = error else { return false }
            return true
        }
        #expect(try molly.db.document("n") == nil)

        var explicit = ReplicatorConfiguration(database: molly.db, target: url("naomi:nope"))
        explicit.authenticator = .basic(user: "naomi", password: "s3cret")
        let r1 = Replicator(configuration: explicit)
        try await r1.run()
        #expect(try molly.body("n") == ["v": 1])

        try naomi.put("n2", ["v": 2])
        let r2 = Replicator(configuration: ReplicatorConfiguration(database: molly.db, target: url("naomi:s%33cret")))
        #expect(r2.configuration.target == naomi.url)
        #expect(r2.configuration.authenticator == .basic(user: "naomi", password: "s3cret"))
        try await r2.run()
        #expect(try molly.body("n2") == ["v": 2])
        await molly.stop(); await naomi.stop()
    }

    @Test func continuousReplicationSurvivesThePeerRestarting() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        let port = try #require(naomi.listener?.port)
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.continuous = true
        c.maxAttemptWaitTime = 1
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        r.start()
        let first = try molly.put("first", ["n": 1])
        try await waitFor(naomi.db, "first", revision: first.revisionID?.description)

        await naomi.listener?.stop()
        for await s in statuses where s.activity == .offline { break }
        let second = try molly.put("second", ["n": 2])
        var config = SyncListener.Configuration()
        config.port = port
        let again = try await SyncListener.start(serving: ["naomi": naomi.db], configuration: config)
        try await waitFor(naomi.db, "second", revision: second.revisionID?.description)
        let third = try naomi.put("third", ["n": 3])
        try await waitFor(molly.db, "third", revision: third.revisionID?.description)
        await r.stop()
        #expect(try naomi.db.documentCount() == 3)
        for id in ["first", "second"] {
            #expect(try naomi.db.revisionTree(of: id)?.nodes.count == 1, "\(id) stored once")
        }
        await again.stop()
        await molly.stop(); naomi.db.close()
    }

    /// A long-lived peer reconnects thousands of times: a stopped replicator, its workers and
    /// both ends of its connection must be freed, not kept alive by each other.
    @Test func aStoppedReplicatorIsReleased() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        try molly.put("a", ["v": 1])
        weak var weakReplicator: Replicator?
        do {
            var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
            c.continuous = true
            let r = Replicator(configuration: c)
            weakReplicator = r
            let statuses = r.statusChanges()
            r.start()
            for await s in statuses where s.activity == .idle { break }
            #expect(naomi.listener?.connectionCount == 1)
            await r.stop()
        }
        #expect(weakReplicator == nil)
        await naomi.stop(); await molly.stop()
    }

    /// A one-shot sync gives up on a peer that stays unreachable once `maxOfflineTime` has
    /// passed, however many attempts are left, and says so.
    @Test func anUnreachablePeerIsGivenUpAfterMaxOfflineTime() async throws {
        let molly = try await Peer.make("molly")
        var c = ReplicatorConfiguration(database: molly.db, target: "ws://127.0.0.1:1/nobody")
        c.maxAttempts = 1000
        c.maxAttemptWaitTime = 0.2
        c.maxOfflineTime = 1
        let r = Replicator(configuration: c)
        await #expect(throws: ReplicationError.self) { try await r.run() }
        guard case let .gaveUp(attempts, _, why)? = r.status.lastError else {
            Issue.record("expected a give-up, got \(String(describing: r.status.lastError))")
            return
        }
        #expect(attempts >= 1 && attempts < 1000 && !why.isEmpty, "\(attempts): \(why)")
        #expect(r.status.lastError?.description.hasPrefix("connection failed: gave up after ") == true)
        await molly.stop()
    }

    @Test func unreachablePeerGivesUpAfterMaxAttempts() async throws {
        let molly = try await Peer.make("molly")
        var c = ReplicatorConfiguration(database: molly.db, target: "ws://127.0.0.1:1/nobody")
        c.maxAttempts = 2
        c.maxAttemptWaitTime = 0.05
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        let seen = Task { var a: [ActivityLevel] = []; for await s in statuses { a.append(s.activity) }; return a }
        await #expect(throws: ReplicationError.self) { try await r.run() }
        let activities = await seen.value
        #expect(activities.contains(.offline))
        #expect(activities.last == .stopped)
        #expect(r.status.lastError?.isTransient == true)
        await molly.stop()
    }

    @Test func malformedMessagesGetErrorResponsesAndChangeNothing() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        try naomi.put("existing", ["v": 1])
        let before = naomi.db.lastSequence
        let conn = try await BLIPConnection.connect(to: naomi.url + "/_blipsync", app: SyncListener.app)
        func expectError(_ m: BLIPMessage, code: Int, _ comment: Comment) async {
            do {
                _ = try await conn.send(m)
                Issue.record("no error: \(comment)")
            } catch {
                guard case .errorResponse(_, let c, _) = error else { Issue.record("\(error)"); return }
                #expect(c == code, comment)
            }
        }
        await expectError(.request(profile: "changes", body: Array("{not json".utf8)), code: 400, "malformed changes")
        await expectError(.request(profile: "changes", body: Array(#"[[1,"a"]]"#.utf8)), code: 400, "short changes entry")
        await expectError(.request(profile: "proposeChanges", body: Array(#"[["a","zz"]]"#.utf8)), code: 400, "bad revision ID")
        await expectError(.request(profile: "rev", properties: [("id", "x"), ("rev", "3-aa"), ("history", "1-bb")],
                                   body: Array("{}".utf8)), code: 400, "broken history")
        await expectError(.request(profile: "rev", properties: [("rev", "1-aa")], body: Array("{}".utf8)), code: 400, "no docID")
        await expectError(.request(profile: "rev", properties: [("id", "x"), ("rev", "1-aa")], body: Array("[1]".utf8)),
                          code: 400, "body not an object")
        await expectError(.request(profile: "rev", properties: [("id", "existing"), ("rev", "1-aa"), ("noconflicts", "1")],
                                   body: Array(#"{"v":2}"#.utf8)), code: 409, "conflict from the wire")
        await expectError(.request(profile: "sing"), code: 404, "unknown profile")
        #expect(naomi.db.lastSequence == before)
        #expect(try naomi.db.documentCount() == 1)
        // The connection still works afterwards.
        let ok = try await conn.send(.request(profile: "proposeChanges", body: Array(#"[["new","1-aa"]]"#.utf8)))
        #expect(ok.body == Array("[]".utf8))
        // A conflicting proposal: the bare status unless the proposer asked for the revision.
        let current = try #require(try naomi.db.document("existing")?.revisionID).description
        let conflicting = Array(#"[["existing","2-bb","1-aa"]]"#.utf8)
        let bare = try await conn.send(.request(profile: "proposeChanges", body: conflicting))
        #expect(String(decoding: bare.body, as: UTF8.self) == "[409]")
        let withRev = try await conn.send(.request(profile: "proposeChanges", properties: [("conflictIncludesRev", "true")],
                                                   body: conflicting))
        #expect(String(decoding: withRev.body, as: UTF8.self) == #"[{"rev":"\#(current)","status":409}]"#)
        await conn.close()
        await naomi.stop()
    }

    @Test func replicatorReportsAPeerSendingGarbage() async throws {
        let molly = try await Peer.make("molly")
        // Sends a `rev` with a broken history and a malformed `changes`.
        let listener = try await Self.fakeFeeder { conn in
            conn.send(.request(profile: "rev", properties: [("id", "bad"), ("rev", "5-aa"), ("history", "2-bb")],
                               body: Array("{}".utf8))) { _ in }
            conn.send(.request(profile: "changes", body: Array("[[1,2,3]".utf8))) { _ in }
        }
        let r = Self.pull(into: molly, from: listener)
        let log = EventLog(r)
        try await Self.expectProtocolError(r)
        let events = await log.task.value
        #expect(events.contains { $0.documentID == "bad" && $0.kind == .failed(.store(.brokenHistory(reason: "5-aa is followed by 2-bb"))) }
                || events.contains { $0.documentID == "bad" })
        #expect(try molly.db.documentCount(includeDeleted: true) == 0)
        await listener.close()
        await molly.stop()
    }

    /// A `rev` that names no document cannot complete the entry it was sent for: the pull ends
    /// with a protocol error instead of waiting for it forever.
    @Test(.timeLimit(.minutes(5))) func aRevWithoutItsIDEndsThePull() async throws {
        let molly = try await Peer.make("molly")
        let listener = try await Self.fakeFeeder { conn in
            conn.send(.request(profile: "changes", body: Array(#"[[1,"doc","1-aa"]]"#.utf8))) { _ in
                conn.send(.request(profile: "rev", properties: [("rev", "1-aa")], body: Array("{}".utf8))) { _ in }
            }
        }
        try await Self.expectProtocolError(Self.pull(into: molly, from: listener))
        #expect(try molly.db.documentCount(includeDeleted: true) == 0)
        await listener.close()
        await molly.stop()
    }

    /// A fake passive peer at `/evil`: answers the checkpoint calls, and runs `feed` once asked
    /// for changes.
    static func fakeFeeder(_ feed: @escaping @Sendable (BLIPConnection) -> Void) async throws -> WebSocketListener {
        try await BLIPConnection.listen(path: "/evil/_blipsync", app: SyncListener.app) { conn in
            conn.register(profile: "getCheckpoint") { $0.respondError(domain: "HTTP", code: 404, message: "missing") }
            conn.register(profile: "setCheckpoint") { $0.respond(properties: [("rev", "0-1")]) }
            conn.register(profile: "subChanges") { req in
                req.respond()
                feed(conn)
            }
        }
    }

    /// A one-shot pull from a fake feeder, one attempt.
    static func pull(into peer: Peer, from listener: WebSocketListener) -> Replicator {
        var c = ReplicatorConfiguration(database: peer.db, target: "ws://127.0.0.1:\(listener.port)/evil")
        c.type = .pull
        c.maxAttempts = 1
        return Replicator(configuration: c)
    }

    static func expectProtocolError(_ r: Replicator) async throws {
        await #expect(throws: ReplicationError.self) { try await r.run() }
        guard case .protocolError? = r.status.lastError else {
            Issue.record("expected a protocol error, got \(String(describing: r.status.lastError))")
            return
        }
    }
}
