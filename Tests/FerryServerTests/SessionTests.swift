import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `/_session` and its `AuthSession` cookie (Protocol/rest.md, "Sessions"), the password pool,
/// and that a reader keeps its `_local` checkpoints. Compared with a real CouchDB in
/// Tests/REST/couch_session.py; here the pieces, against a real daemon on real sockets.
@Suite("Sessions: AuthSession cookies, the password pool, readers' _local")
struct SessionTests {
    static let users = [
        DaemonFixture.user("rita", "r-pass", ["db": .reader]),
        DaemonFixture.user("will", "w-pass", ["db": .writer]),
    ]

    func fixture() async throws -> DaemonFixture {
        let f = try await DaemonFixture(users: Self.users, databases: ["db"])
        _ = try #require(f.daemon.registry.database("db")).save(Document(id: "seed", properties: ["v": 1]))
        return f
    }

    /// The cookie value of a `Set-Cookie` field.
    static func cookie(_ setCookie: String?) -> String? {
        guard let setCookie, let eq = setCookie.firstIndex(of: "="), let semi = setCookie.firstIndex(of: ";") else { return nil }
        return String(setCookie[setCookie.index(after: eq)..<semi])
    }

    static func login(_ f: DaemonFixture, _ name: String, _ password: String) async throws -> HTTPTestResponse {
        try await f.request("POST", "/_session", body: Array("name=\(name)&password=\(password)".utf8),
                            headers: [("Content-Type", "application/x-www-form-urlencoded")])
    }

    @Test func cookieFormatSignatureAndLifetime() throws {
        let hash = try PasswordHash(password: "pw", iterations: 1000)
        let key = SessionCookie.key(secret: Array(repeating: 7, count: 32), passwordHash: hash)
        let c = SessionCookie(user: "bob", timestamp: 0x6B0B_1FA9, key: key)
        // base64url without padding of NAME:HEX:32 raw MAC bytes, as CouchDB writes it.
        #expect(!c.value.contains("=") && !c.value.contains("+") && !c.value.contains("/"))
        var b64 = c.value.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        let raw = try #require(Data(base64Encoded: b64))
        #expect(Array(raw.prefix(13)) == Array("bob:6B0B1FA9:".utf8))
        #expect(raw.count == 13 + 32)

        guard case .cookie(let parsed) = SessionCookie.parse(cookieHeader: "a=1; AuthSession=\(c.value); b=2") else {
            Issue.record("the cookie did not parse")
            return
        }
        #expect(parsed == c)
        #expect(parsed.isSigned(with: key))
        #expect(!parsed.isSigned(with: SessionCookie.key(secret: Array(repeating: 8, count: 32), passwordHash: hash)))
        // A new password (a new salt and hash) ends the session.
        #expect(!parsed.isSigned(with: SessionCookie.key(secret: Array(repeating: 7, count: 32), passwordHash: try PasswordHash(password: "pw", iterations: 1000))))

        #expect(c.secondsLeft(now: 0x6B0B_1FA9 + 100, timeout: 600) == 500)
        #expect(!c.needsRenewal(now: 0x6B0B_1FA9 + 60, timeout: 600))
        #expect(c.needsRenewal(now: 0x6B0B_1FA9 + 61, timeout: 600))

        #expect(SessionCookie.parse(cookieHeader: nil) == .absent)
        #expect(SessionCookie.parse(cookieHeader: "AuthSession=") == .absent)
        #expect(SessionCookie.parse(cookieHeader: "other=1") == .absent)
        #expect(SessionCookie.parse(cookieHeader: "AuthSession=Ym9i") == .malformed)  // "bob": no colons
        #expect(SessionCookie.parse(cookieHeader: "AuthSession=%%%") == .malformed)

        let header = SessionCookie.setCookie(c.value, now: 0, timeout: 600)
        #expect(header == "AuthSession=\(c.value); Version=1; Expires=Thu, 01-Jan-1970 00:10:00 GMT; Max-Age=600; Path=/; HttpOnly; SameSite=Lax")
        #expect(SessionCookie.setCookie(c.value, now: 0, timeout: 600, secure: true, sameSite: .none).hasSuffix("HttpOnly; Secure; SameSite=None"))
        #expect(SessionCookie.setCookie(c.value, now: 0, timeout: 600, sameSite: .unset).hasSuffix("; Path=/; HttpOnly"))
    }

    @Test func loginSessionAndLogoutOverREST() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        // Anonymous access is off, yet anyone may ask who they are and log in.
        let anonymous = try await f.request("GET", "/_session")
        #expect(anonymous.status == 200)
        #expect(anonymous.text == #"{"info":{"authentication_handlers":["cookie","default"]},"ok":true,"userCtx":{"name":null,"roles":[]}}"#)

        let login = try await Self.login(f, "will", "w-pass")
        #expect(login.status == 200)
        #expect(login.text == #"{"name":"will","ok":true,"roles":[]}"#)
        let setCookie = try #require(login.header("Set-Cookie"))
        #expect(setCookie.hasSuffix("; Version=1; Expires=\(setCookie.split(separator: ";")[2].dropFirst(9)); Max-Age=600; Path=/; HttpOnly; SameSite=Lax"))
        let value = try #require(Self.cookie(setCookie))
        let jar = [("Cookie", "AuthSession=\(value)")]

        let me = try await f.request("GET", "/_session", headers: jar)
        #expect(me.object["userCtx"]?.objectValue?["name"]?.stringValue == "will")
        #expect(me.object["info"]?.objectValue?["authenticated"]?.stringValue == "cookie")
        #expect(try await f.request("GET", "/db/seed", headers: jar).status == 200)
        #expect(try await f.request("PUT", "/db/by-cookie", json: "{}", headers: jar).status == 201)
        // A valid cookie wins over wrong Basic credentials, as in CouchDB.
        #expect(try await f.request("GET", "/db/seed", headers: jar, user: ("will", "wrong")).status == 200)

        let json = try await f.request("POST", "/_session", json: #"{"name":"rita","password":"r-pass"}"#)
        #expect(json.status == 200 && json.header("Set-Cookie") != nil)

        let wrong = try await Self.login(f, "will", "nope")
        #expect(wrong.status == 401)
        #expect(wrong.header("WWW-Authenticate") == nil)
        #expect(wrong.header("Set-Cookie")?.hasPrefix("AuthSession=; Version=1;") == true)
        #expect(try await f.request("POST", "/_session", body: Array("x".utf8), headers: [("Content-Type", "text/plain")]).status == 415)
        #expect(try await f.request("GET", "/_session", headers: [("Cookie", "AuthSession=Ym9i")]).status == 400)
        #expect(try await f.request("PUT", "/_session", json: "{}").status == 405)

        let next = try await f.request("POST", "/_session?next=/db", body: Array("name=will&password=w-pass".utf8),
                                       headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(next.status == 302)
        #expect(next.header("Location") == "http://127.0.0.1:\(f.daemon.port)/db")
        let offsite = try await f.request("POST", "/_session?next=//evil.example/", body: Array("name=will&password=w-pass".utf8),
                                          headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(offsite.status == 200 && offsite.header("Location") == nil)

        let logout = try await f.request("DELETE", "/_session", headers: jar)
        #expect(logout.status == 200 && logout.header("Set-Cookie")?.hasPrefix("AuthSession=;") == true)
        // The secret that signs cookies is private to the server's owner.
        var st = stat()
        #expect(stat(f.dir.path("data/_session_secret"), &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test func cookiesAreRenewedAfterATenthAndExpire() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let access = f.daemon.access
        // Issued just now (of 600 s): good, not renewed. The clock is read right before the
        // request, so however loaded the machine the request is well inside the first tenth.
        let young = try #require(access.issueCookie(for: "will", now: AccessControl.now()))
        let r1 = try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(young)")])
        #expect(r1.status == 200 && r1.header("Set-Cookie") == nil)
        // Issued 100 s ago: answered and renewed with a fresh cookie that logs in.
        let now = AccessControl.now()
        let old = try #require(access.issueCookie(for: "will", now: now - 100))
        let r2 = try await f.request("GET", "/db/missing", headers: [("Cookie", "AuthSession=\(old)")])
        #expect(r2.status == 404)  // renewed on any answer, as CouchDB does
        let renewed = try #require(Self.cookie(r2.header("Set-Cookie")))
        #expect(renewed != old)
        #expect(r2.header("Set-Cookie")?.contains("Max-Age=600; Path=/; HttpOnly") == true)
        let r3 = try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(renewed)")])
        #expect(r3.status == 200 && r3.header("Set-Cookie") == nil)
        // Issued 700 s ago: expired, so the request is anonymous (refused here: anonymous is off).
        let expired = try #require(access.issueCookie(for: "will", now: now - 700))
        #expect(try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(expired)")]).status == 401)
        let who = try await f.request("GET", "/_session", headers: [("Cookie", "AuthSession=\(expired)")])
        #expect(who.object["userCtx"]?.objectValue?["name"] == .null)
    }

    @Test func aPasswordChangeEndsTheSessions() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let value = try #require(Self.cookie(try await Self.login(f, "will", "w-pass").header("Set-Cookie")))
        #expect(try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(value)")]).status == 200)
        try UserStore(dataDirectory: f.dir.path("data")).update { users in
            users["will"]?.password = try? PasswordHash(password: "new-pass", iterations: 1000)
        }
        // The daemon re-reads the users file within a second or so of its change.
        let deadline = ContinuousClock.now + .seconds(20)
        var status = 200
        while status == 200, ContinuousClock.now < deadline {
            status = try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(value)")]).status
            if status == 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == 401)
        #expect(try await Self.login(f, "will", "new-pass").status == 200)
    }

    /// Basic credentials already seen are recognised by their fingerprint without another
    /// check (`CredentialFingerprint`); a password change retires them all the same.
    @Test func recognisedBasicCredentialsEndWithAPasswordChange() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let basic = [("Authorization", "Basic " + Data("will:w-pass".utf8).base64EncodedString())]
        #expect(try await f.request("GET", "/db/seed", headers: basic).status == 200)
        #expect(try await f.request("GET", "/db/seed", headers: basic).status == 200)
        // Another field with the same credentials (the scheme's case differs) is checked on its own.
        let lower = [("Authorization", "basic " + Data("will:w-pass".utf8).base64EncodedString())]
        #expect(try await f.request("GET", "/db/seed", headers: lower).status == 200)
        let wrong = [("Authorization", "Basic " + Data("will:w-pasS".utf8).base64EncodedString())]
        #expect(try await f.request("GET", "/db/seed", headers: wrong).status == 401)
        try UserStore(dataDirectory: f.dir.path("data")).update { users in
            users["will"]?.password = try? PasswordHash(password: "new-pass", iterations: 1000)
        }
        let deadline = ContinuousClock.now + .seconds(20)
        var status = 200
        while status == 200, ContinuousClock.now < deadline {
            status = try await f.request("GET", "/db/seed", headers: basic).status
            if status == 200 { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(status == 401)
        #expect(try await f.request("GET", "/db/seed", headers: lower).status == 401)
        let fresh = [("Authorization", "Basic " + Data("will:new-pass".utf8).base64EncodedString())]
        #expect(try await f.request("GET", "/db/seed", headers: fresh).status == 200)
    }

    @Test func aCookieOpensTheReplicationWebSocketAsBasicDoes() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let local = try Database.open(at: f.dir.path("local.ferry"))
        defer { local.close() }
        _ = try local.save(Document(id: "mine", properties: ["x": 1]))
        func replicator(_ type: ReplicatorConfiguration.ReplicatorType, cookie: String) -> Replicator {
            var c = ReplicatorConfiguration(database: local, target: f.daemon.replicationURL(for: "db"))
            c.type = type
            c.headers = ["Cookie": "AuthSession=\(cookie)"]
            c.maxAttempts = 1
            return Replicator(configuration: c)
        }
        let rita = try #require(Self.cookie(try await Self.login(f, "rita", "r-pass").header("Set-Cookie")))
        let will = try #require(Self.cookie(try await Self.login(f, "will", "w-pass").header("Set-Cookie")))
        try await replicator(.pull, cookie: rita).run()
        #expect(try local.document("seed") != nil)
        // The reader's cookie gives the reader's rights: its push is refused.
        let push = replicator(.push, cookie: rita)
        await #expect(throws: ReplicationError.self) { try await push.run() }
        try await replicator(.push, cookie: will).run()
        #expect(try f.daemon.registry.database("db")?.document("mine") != nil)
        // A forged cookie logs in nobody: 401 at the upgrade (anonymous is off).
        let forged = SessionCookie(user: "will", timestamp: AccessControl.now(), key: Array(repeating: 1, count: 32)).value
        let refused = replicator(.pull, cookie: forged)
        await #expect(throws: ReplicationError.self) { try await refused.run() }
        if case .httpStatus(let s, _)? = refused.status.lastError { #expect(s == 401) } else {
            Issue.record("expected 401, got \(String(describing: refused.status.lastError))")
        }
    }

    /// The statuses of a flood's requests, in the order they were answered.
    final class Statuses: Sendable {
        let list = Mutex<[Int]>([])
    }

    /// While wrong passwords flood the server, a client that holds a cookie keeps being
    /// answered: the checks run on their own bounded pool, not on the event loop or the
    /// cooperative pool; what the pool cannot queue is refused with 503 at once. Shown by
    /// order, not by a stopwatch: the pool's only thread is held by a gate, so every cookie
    /// answer and every 503 that arrives before the gate opens did not wait for a check.
    @Test func aWrongPasswordFloodDoesNotStallOtherClients() async throws {
        let costly = UserRecord(name: "kim", password: try PasswordHash(password: "k-pass"), roles: ["db": .writer])
        // A pool of its own (one thread, 8 waiting), so that tests running beside this one do
        // not meet its flood.
        let pool = PasswordCheckPool(threads: 1, queueLimit: 8)
        // Failed logins are not throttled here: this is the pool's bound, not the 429s'
        // (HostileClientTests has those).
        let f = try await DaemonFixture(users: Self.users + [costly], databases: ["db"], checks: pool, failureLimits: .off)
        defer { Task { await f.stop() } }
        _ = try #require(f.daemon.registry.database("db")).save(Document(id: "seed", properties: ["v": 1]))
        let value = try #require(Self.cookie(try await Self.login(f, "will", "w-pass").header("Set-Cookie")))

        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        // Opened however the test ends, so a failed expectation cannot leave the pool held.
        defer { gate.signal() }
        let holder = Task { try await pool.run { started.signal(); gate.wait() } }
        await offPool { started.wait() }
        let statuses = Statuses()
        let flood = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<48 {
                    group.addTask {
                        let s = try await f.request("GET", "/db/seed", user: ("kim", "wrong-\(i)")).status
                        statuses.list.withLock { $0.append(s) }
                    }
                }
                try await group.waitForAll()
            }
        }
        // 8 checks wait behind the gate; the other 40 were refused without waiting.
        let deadline = ContinuousClock.now + .seconds(120)
        while statuses.list.withLock({ $0.count }) < 40 || pool.waiting < 8, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(pool.waiting == 8)
        #expect(statuses.list.withLock { $0 } == Array(repeating: 503, count: 40))
        for _ in 0..<10 {
            #expect(try await f.request("GET", "/db/seed", headers: [("Cookie", "AuthSession=\(value)")]).status == 200)
        }
        #expect(pool.waiting == 8, "the cookie requests were answered while every check still waited")
        gate.signal()
        try await holder.value
        try await flood.value
        let all = statuses.list.withLock { $0 }
        #expect(all.count == 48 && all.filter { $0 == 401 }.count == 8, "\(all)")
        // The right password still gets in once the flood is over.
        #expect(try await f.request("GET", "/db/seed", user: ("kim", "k-pass")).status == 200)
    }

    @Test func aReaderKeepsItsLocalCheckpoints() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let rita = ("rita", "r-pass")
        let put = try await f.request("PUT", "/db/_local/checkpoint", json: #"{"last_seq":"7"}"#, user: rita)
        #expect(put.status == 201)
        let rev = try #require(put.object["rev"]?.stringValue)
        #expect(try await f.request("GET", "/db/_local/checkpoint", user: rita).object["last_seq"]?.stringValue == "7")
        #expect(try await f.request("PUT", "/db/_local/checkpoint", json: #"{"_rev":"\#(rev)","last_seq":"9"}"#, user: rita).status == 201)
        #expect(try await f.request("DELETE", "/db/_local/checkpoint", user: rita).status == 200)
        // Documents stay out of a reader's reach.
        #expect(try await f.request("PUT", "/db/doc", json: "{}", user: rita).status == 403)
    }
}
