import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// HTTP/1.1 on the daemon's port, byte for byte (Protocol/rest.md, "One port: upgrade or
/// REST"): pipelining, chunked bodies, 100-continue, limits, timeouts, and a WebSocket upgrade
/// after REST requests on the same connection.
@Suite("HTTP connections: pipelining, chunked, 100-continue, limits, upgrade")
struct HTTPConnectionTests {
    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let body = #"{"n":1}"#
        // Three requests in one write: a slow-ish write, a read of it, and the server info last.
        let requests = "PUT /db/p HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            + "GET /db/p HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /db/missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let raw = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(requests.utf8)))
        let statuses = raw.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
        #expect(statuses == ["201", "200", "404"])
        #expect(raw.contains(#""n":1"#))
        #expect(raw.contains("Connection: close"))
        // Every answer carries Date (RFC 9110 §6.6.1; clients age their caches by it).
        #expect(raw.components(separatedBy: "\r\nDate: ").count == 4, "\(raw)")
    }

    @Test func aClientThatClosesItsSendingSideStillGetsEveryAnswer() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        // Two requests, then EOF from the client (as `nc -N` does): both answered, then closed.
        let requests = "PUT /db/h HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GET /db/h HTTP/1.1\r\nHost: x\r\n\r\n"
        let raw = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(requests.utf8), halfClose: true))
        let statuses = raw.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
        #expect(statuses == ["201", "200"])
    }

    @Test func chunkedBodyAndExpectContinue() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let chunked = "PUT /db/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + "5\r\n{\"a\":\r\n2\r\n7}\r\n0\r\n\r\n"
        let r1 = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(chunked.utf8)))
        #expect(r1.hasPrefix("HTTP/1.1 201"))
        #expect(try f.daemon.registry.database("db")?.document("c")?["a"] == 7)
        let expect = "PUT /db/e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        let interim = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(expect.utf8) + Array("{}".utf8)))
        #expect(interim.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201"))
    }

    @Test func limitsAreAnsweredAndTheConnectionClosed() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"]) {
            $0.httpLimits.maxBodySize = 1024
            $0.httpLimits.maxHeadSize = 2048
        }
        defer { Task { await f.stop() } }
        let big = "PUT /db/big HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "x", count: 5000)
        let r1 = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(big.utf8)))
        #expect(r1.hasPrefix("HTTP/1.1 413"))
        #expect(r1.contains(#""error":"too_large""#))
        let head = "GET /db HTTP/1.1\r\nHost: x\r\nX-Long: \(String(repeating: "y", count: 4000))\r\n\r\n"
        let r2 = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(head.utf8)))
        #expect(r2.hasPrefix("HTTP/1.1 431"))
        let bad = "GET /db HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(bad.utf8))).hasPrefix("HTTP/1.1 400"))
        #expect(try f.daemon.registry.database("db")?.document("big") == nil)
    }

    @Test func anIdleConnectionIsClosedAndASlowRequestGets408() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"]) {
            $0.idleTimeout = 0.3
            $0.requestTimeout = 0.3
        }
        defer { Task { await f.stop() } }
        // A complete request, then silence: answered, then closed by the server (the read ends).
        let kept = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)))
        #expect(kept.hasPrefix("HTTP/1.1 200"))
        // A request, then half of the next one, then silence: 408. (Half of a connection's first
        // request is the WebSocket side's to time out, with its handshake timeout.)
        let slow = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost:".utf8)))
        #expect(slow.hasPrefix("HTTP/1.1 200"))
        #expect(slow.contains("HTTP/1.1 408"))
    }

    @Test func aWebSocketUpgradeAfterRESTRequestsOnTheSameConnection() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let upgrade = "GET /db/_blipsync HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Protocol: BLIP_3+CBMobile_3\r\n\r\n"
        let bytes = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + upgrade
        // Both answers arrive in order: the server's welcome, then the switch to BLIP.
        let both = Self.text(try await HTTPTestClient.exchange(port: f.daemon.port, Array(bytes.utf8), until: Array("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".utf8)))
        #expect(both.contains("Sec-WebSocket-Protocol: BLIP_3+CBMobile_3"))
        let welcome = try #require(both.range(of: "HTTP/1.1 200"))
        let switched = try #require(both.range(of: "HTTP/1.1 101"))
        #expect(welcome.lowerBound < switched.lowerBound)
    }
}
