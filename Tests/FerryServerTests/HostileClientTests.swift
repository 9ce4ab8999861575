@testable import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Clients that attack or misbehave (docs/daemon.md, "Limits"): failed logins earn 429 per
/// address without locking the account's owner out, one address cannot take every
/// connection, and a feed nobody reads neither grows the daemon's memory nor lives forever.
/// The attackers connect from other loopback addresses (127.0.0.x) than the good client.
@Suite("Hostile clients")
struct HostileClientTests {
    static func basicWrong(_ n: Int) -> String { "Basic " + Data("admin:wrong\(n)".utf8).base64EncodedString() }

    @Test func failedLoginsGet429FromTheirAddressWithinTenAndTheOwnerStillLogsIn() async throws {
        // A first delay of ten minutes: no refusal can run out while the test runs, however slowly.
        let f = try await DaemonFixture(users: [DaemonFixture.user("admin", "right", ["*": .admin])],
                                        failureLimits: FailureThrottle.Limits(freeFailures: 5, baseDelay: .seconds(600), maxDelay: .seconds(600)))
        defer { Task { await f.stop() } }
        var statuses: [Int] = []
        var retryAfter: String?
        for n in 0..<10 {
            let r = try await RawClient.request(port: f.daemon.port, from: "127.0.0.23",
                                                "GET /_all_dbs HTTP/1.1\r\nHost: x\r\nAuthorization: \(Self.basicWrong(n))\r\nConnection: close\r\n\r\n")
            statuses.append(r.status)
            if r.status == 429 { retryAfter = retryAfter ?? r.header("Retry-After") }
        }
        #expect(statuses == [401, 401, 401, 401, 401, 429, 429, 429, 429, 429])
        #expect((500...600).contains(Int(retryAfter ?? "") ?? 0), "Retry-After: \(retryAfter ?? "none")")
        // The same user from a clean address, its password never checked before: let in.
        let owner = try await f.request("GET", "/_all_dbs", user: ("admin", "right"))
        #expect(owner.status == 200)
        // The attacker's address stays refused even with the right password meanwhile…
        let attacker = try await RawClient.request(port: f.daemon.port, from: "127.0.0.23",
                                                   "GET /_all_dbs HTTP/1.1\r\nHost: x\r\nAuthorization: \(Self.basicWrong(99))\r\nConnection: close\r\n\r\n")
        #expect(attacker.status == 429)
        // …and the counts are in the metrics.
        let metrics = try await f.request("GET", "/_metrics", user: ("admin", "right")).text
        func counter(_ name: String) -> Int? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ")[1]) }
        }
        #expect((counter("ferry_login_failures_total") ?? 0) == statuses.filter { $0 == 401 }.count)
        #expect((counter("ferry_login_throttled_total") ?? 0) == statuses.filter { $0 == 429 }.count + 1)
    }

    @Test func aRepeatedWrongPasswordIsNotCheckedAgain() async throws {
        let access = AccessControl(users: [DaemonFixture.user("u", "right", ["*": .writer])],
                                   policy: { var p = AccessControl.Policy(); p.failureLimits = .off; return p }(),
                                   checks: PasswordCheckPool(threads: 1, queueLimit: 0))
        // The first check runs on the pool; the repeats answer from the refusal cache, so a
        // pool that admits one check at a time is never found busy by 50 of them at once.
        #expect(await access.checkPassword(name: "u", password: "nope", address: "127.0.0.2").failure?.status == 401)
        let statuses = await withTaskGroup(of: Int.self) { g in
            for _ in 0..<50 { g.addTask { await access.checkPassword(name: "u", password: "nope", address: "127.0.0.2").failure?.status ?? 200 } }
            return await g.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 401 }, "\(statuses)")
        #expect(access.throttle.failureCount == 51)
    }

    @Test func theDelayDoublesAndIsCapped() {
        let t = FailureThrottle(limits: FailureThrottle.Limits(freeFailures: 2, baseDelay: .seconds(1), maxDelay: .seconds(10)))
        #expect([1, 2, 3, 4, 5, 9].map { t.delay(after: $0) } == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        let start = ContinuousClock.now
        t.recordFailure(address: "a", user: "u", now: start)
        #expect(t.refusal(address: "a", user: "u", now: start) == nil)
        t.recordFailure(address: "a", user: "u", now: start)
        #expect(t.refusal(address: "a", user: "u", now: start)?.wait == .seconds(1))
        #expect(t.refusal(address: "a", user: "u", now: start + .seconds(2)) == nil)
        t.recordSuccess(address: "a", user: "u")
        t.recordFailure(address: "a", user: "u", now: start)
        #expect(t.refusal(address: "a", user: "u", now: start) == nil)
        // Two checks at once per address; a third waits for neither.
        #expect(t.beginCheck(address: "b") && t.beginCheck(address: "b"))
        #expect(!t.beginCheck(address: "b"))
        #expect(t.beginCheck(address: "c"))
        t.endCheck(address: "b")
        #expect(t.beginCheck(address: "b"))
    }

    @Test func requestBodiesHoldABoundedTotalAndSmallOnesAreNotRefused() {
        let b = RequestBodyBudget(total: 1000, perAddress: 800, free: 100)
        #expect(b.take(500, held: 0, address: "a"))       // 400 past the free part
        #expect(!b.take(400, held: 500, address: "a"))    // the address would hold 900
        #expect(b.take(300, held: 0, address: "c"))       // 200 past: 600 of 1000
        #expect(!b.take(600, held: 0, address: "d"))      // 500 past would make 1100
        #expect(b.take(100, held: 0, address: "e"))       // small: its address only
        b.release(500, address: "a")
        #expect(b.take(600, held: 0, address: "d"))
        b.release(600, address: "d"); b.release(300, address: "c"); b.release(100, address: "e")
        #expect(b.held == 0)
    }

    @Test func connectionsBeyondThePerAddressLimitGet503AndOthersAreServed() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, configure: { $0.maxConnectionsPerAddress = 3 })
        defer { Task { await f.stop() } }
        // Three idle connections from one address hold its slots (a request each proves they
        // were admitted); the fourth is refused; another address is served.
        // (Blocking socket calls run off the cooperative pool, which answers the requests.)
        var held: [RawClient] = []
        defer { for c in held { c.close() } }
        let port = f.daemon.port
        for _ in 0..<3 {
            let opened: Result<(RawClient, Int), HTTPTestClient.Failure> = await offPool {
                do {
                    let c = try RawClient(port: port, from: "127.0.0.24")
                    try c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    return .success((c, try c.readResponse().status))
                } catch { return .failure(HTTPTestClient.Failure(reason: "\(error)")) }
            }
            let (c, status) = try opened.get()
            held.append(c)
            #expect(status == 200)
        }
        let refused = try await RawClient.request(port: f.daemon.port, from: "127.0.0.24", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") != nil)
        #expect(try await f.request("GET", "/").status == 200)
        // A slot freed is a slot given again.
        held.removeLast().close()
        let again = try await waitFor { (try? await RawClient.request(port: f.daemon.port, from: "127.0.0.24", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status) == 200 }
        #expect(again)
    }

    @Test func aFeedNobodyReadsStaysWithinTheOutputBufferAndIsDropped() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"], configure: { $0.slowReaderTimeout = 1 })
        defer { Task { await f.stop() } }
        let db = try #require(f.daemon.registry.database("db"))
        // Large rows, so that few of them fill the socket buffers even on a slow machine.
        let filler = String(repeating: "x", count: 100_000)
        try db.inBatch { b throws(StoreError) in
            for i in 0..<300 { try b.save(Document(id: "d\(i)", properties: ["f": .string(filler)])) }
        }
        // About 30 MB of feed; the client reads nothing through a small receive buffer.
        let before = f.daemon.httpConnections.bytesOut
        let port = f.daemon.port
        let opened: Result<RawClient, HTTPTestClient.Failure> = await offPool {
            do {
                let c = try RawClient(port: port, from: "127.0.0.25", receiveBuffer: 4096)
                try c.send("GET /db/_changes?feed=continuous&include_docs=true&heartbeat=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
                return .success(c)
            } catch { return .failure(HTTPTestClient.Failure(reason: "\(error)")) }
        }
        let c = try opened.get()
        defer { c.close() }
        // The daemon drops it after a second of no progress; until then it wrote at most its
        // output buffer plus what the kernel's socket buffers hold (a few MB), not the feed.
        let dropped = try await waitFor { f.daemon.httpConnections.openConnections == 0 }
        #expect(dropped, "the connection of a client that reads nothing was not dropped")
        let sent = f.daemon.httpConnections.bytesOut - before
        #expect(sent < 12_000_000, "wrote \(sent) bytes of a feed nobody read")
    }

    /// Polls `condition` until it holds or two minutes pass (a hang guard, not a margin).
    func waitFor(_ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}

extension Result {
    var failure: Failure? { if case .failure(let e) = self { e } else { nil } }
}

/// A blocking TCP client bound to a chosen loopback source address, so a test can be several
/// clients (Linux routes all of 127/8 to the loopback device). Use it off the cooperative
/// pool (`offPool`): a blocking read there can hold the thread the daemon needs to answer.
final class RawClient: @unchecked Sendable {
    // @unchecked: the descriptor is used by one test task at a time; nothing shares it.
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, from source: String, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPTestClient.Failure(reason: "socket") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, len) } }
        guard bound == 0, connected == 0 else {
            Glibc.close(fd)
            throw HTTPTestClient.Failure(reason: "connect from \(source): errno \(errno)")
        }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw HTTPTestClient.Failure(reason: "send: errno \(errno)") }
            off += n
        }
    }

    /// Reads one whole response (Content-Length framed, or up to the close).
    func readResponse() throws -> HTTPTestResponse {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = Self.headEnd(buffer) {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
                if let length, buffer.count >= end + 4 + length {
                    let raw = Array(buffer[..<(end + 4 + length)])
                    buffer.removeFirst(end + 4 + length)
                    return try HTTPTestClient.parse(raw, method: "GET")
                }
            }
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 {
                guard !buffer.isEmpty else { throw HTTPTestClient.Failure(reason: "closed before a response") }
                defer { buffer = [] }
                return try HTTPTestClient.parse(buffer, method: "GET")
            }
            buffer += chunk[..<n]
        }
    }

    func close() { Glibc.close(fd) }

    static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }

    /// One request on a fresh connection from `source`, off the cooperative pool.
    static func request(port: Int, from source: String, _ text: String) async throws -> HTTPTestResponse {
        let result: Result<HTTPTestResponse, HTTPTestClient.Failure> = await offPool {
            do {
                let c = try RawClient(port: port, from: source)
                defer { c.close() }
                try c.send(text)
                return .success(try c.readResponse())
            } catch let e as HTTPTestClient.Failure { return .failure(e) } catch { return .failure(HTTPTestClient.Failure(reason: "\(error)")) }
        }
        return try result.get()
    }
}
