import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `_changes?feed=longpoll` with heartbeats, and feeds whose client left (Protocol/rest.md,
/// "Changes feed"): CouchDB sends a newline every `heartbeat` ms while a longpoll waits, and a
/// feed nobody reads must not hold its connection until the next commit or the timeout.
@Suite("Longpoll heartbeats and feeds that end with their client")
struct LongpollTests {
    @Test func aLongpollSendsHeartbeatsWhileItWaits() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        _ = try await f.request("PUT", "/db/before", json: "{}")
        // Nothing changes and the timeout is ten minutes away: newlines come meanwhile. (Read
        // until the first one is in the body; no timer of the test's own decides.)
        let raw = try await HTTPTestClient.exchange(
            port: f.daemon.port,
            Array("GET /db/_changes?feed=longpoll&since=now&heartbeat=100&timeout=600000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
            done: { raw in ((try? HTTPTestClient.parse(raw, method: "GET"))?.body.first) == 10 })
        let heartbeat = try HTTPTestClient.parse(raw, method: "GET")
        #expect(heartbeat.status == 200)
        #expect(heartbeat.body.first == 10, "no heartbeat before the ten-minute timeout: \(heartbeat.text)")
        // When the timeout passes: the heartbeats sent so far (any number, on a busy machine
        // none), then the empty page.
        let idle = try await f.request("GET", "/db/_changes?feed=longpoll&since=now&heartbeat=200&timeout=1000")
        #expect(idle.status == 200)
        let page = try JSONParser.parse(Array(idle.body.drop { $0 == 10 }))
        #expect(page.objectValue?["results"]?.arrayValue?.isEmpty == true)
        #expect(page.objectValue?["last_seq"]?.stringValue == "1")

        // A write while it waits ends it with that write, after the heartbeats sent so far.
        let since = try #require(try await f.request("GET", "/db").object["update_seq"]?.stringValue)
        async let waiting = f.request("GET", "/db/_changes?feed=longpoll&since=\(since)&heartbeat=100&timeout=600000")
        _ = try await f.request("PUT", "/db/after", json: "{}")
        let woken = try await waiting
        let rows = try JSONParser.parse(Array(woken.body.drop { $0 == 10 })).objectValue?["results"]?.arrayValue ?? []
        #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue } == ["after"])

        // heartbeat=true: CouchDB's default interval, bounded by the timeout.
        let t = try await f.request("GET", "/db/_changes?feed=longpoll&since=now&heartbeat=true&timeout=300")
        #expect(t.status == 200)
        #expect(try JSONParser.parse(Array(t.body.drop { $0 == 10 })).objectValue?["results"] != nil)
    }

    /// Connects, sends `request`, and closes the socket without reading: a client that left.
    static func sendAndLeave(port: Int, _ request: String) async -> Bool {
        await offPool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return false }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            let bytes = Array(request.utf8)
            let ok = rc == 0 && bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
            close(fd)
            return ok
        }
    }

    @Test(arguments: [
        "feed=longpoll&timeout=600000",
        "feed=longpoll&heartbeat=300000&timeout=600000",
        "feed=continuous&timeout=600000",
        "feed=continuous&heartbeat=300000",
        "feed=eventsource&heartbeat=300000",
    ])
    func aFeedWhoseClientLeftEndsAtOnce(_ query: String) async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let tracker = f.daemon.httpConnections
        let start = ContinuousClock.now
        #expect(await Self.sendAndLeave(port: f.daemon.port, "GET /db/_changes?since=now&\(query) HTTP/1.1\r\nHost: x\r\n\r\n"))
        // The connection was taken; it must close long before the feed's ten minutes (or
        // five-minute heartbeat) would end it. The two minutes are a guard for a busy machine.
        let deadline = start + .seconds(120)
        while tracker.connectionsAccepted < 1 || tracker.openConnections > 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(tracker.connectionsAccepted == 1)
        #expect(tracker.openConnections == 0, "\(query): the feed still holds its connection after \(ContinuousClock.now - start)")
    }

    @Test func aHalfClosedLongpollIsAnsweredAtOnce() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let start = ContinuousClock.now
        let raw = try await HTTPTestClient.exchange(
            port: f.daemon.port, Array("GET /db/_changes?feed=longpoll&since=now&timeout=600000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8),
            halfClose: true)
        let r = try HTTPTestClient.parse(raw, method: "GET")
        #expect(r.status == 200 && r.object["results"]?.arrayValue?.isEmpty == true)
        // Answered, not ended by its ten-minute timeout (HTTPTestClient gives up after two).
        #expect(ContinuousClock.now - start < .seconds(120))
    }
}
