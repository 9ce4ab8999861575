import FerryHTTP
import FerryNet
import Synchronization
import Testing

/// Connections a server accepted.
private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A small HTTP server on a real socket for the client's tests: canned answers by path.
private final class CannedServer: ConnectionHandler, @unchecked Sendable {
    // Loop-confined per connection: one handler object per accepted connection.
    private var decoder = HTTPRequestDecoder()
    private var target = ""
    private var received = 0

    func connectionRead(_ tcp: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        guard let events = try? decoder.feed(UnsafeRawBufferPointer(bytes)) else { tcp.abort(nil); return }
        for e in events {
            switch e {
            case .head(let h):
                target = h.target
                received = 0
                if target == "/refuse" {
                    // Refused on its head: the body is not wanted.
                    tcp.write(HTTPResponseEncoder.encode(HTTPResponseHead(status: 413, headers: [("Connection", "close")]), body: Array("no".utf8)))
                    tcp.close()
                    return
                }
                if h.expectsContinue { tcp.write(HTTPResponseEncoder.continueResponse) }
            case .body(let b): received += b.count
            case .end: answer(tcp)
            }
        }
    }

    private func answer(_ tcp: TCPConnection) {
        func whole(_ status: Int, _ body: String, _ headers: [(name: String, value: String)] = []) {
            tcp.write(HTTPResponseEncoder.encode(HTTPResponseHead(status: status, headers: headers), body: Array(body.utf8)))
        }
        switch target {
        case "/hello": whole(200, "hello")
        case "/expect": whole(200, "got \(received)")
        case "/chunked":
            tcp.write(HTTPResponseEncoder.encodeChunkedHead(HTTPResponseHead(status: 200)))
            tcp.write(HTTPResponseEncoder.chunk(Array("abc".utf8)) + HTTPResponseEncoder.chunk(Array("de".utf8)) + HTTPResponseEncoder.lastChunk)
        case "/gzip":
            tcp.write(HTTPResponseEncoder.encode(HTTPResponseHead(status: 200, headers: [("Content-Encoding", "gzip")]),
                                                 body: Gzip.encode(Array(String(repeating: "z", count: 5000).utf8))))
        case "/close":
            whole(200, "bye", [("Connection", "close")])
            tcp.close()
        case "/redirect": whole(302, "", [("Location", "/hello")])
        case "/silent": break
        case "/feed":
            tcp.write(HTTPResponseEncoder.encodeChunkedHead(HTTPResponseHead(status: 200)))
            for i in 0..<3 { tcp.write(HTTPResponseEncoder.chunk(Array("line \(i)\n".utf8))) }
            tcp.write(HTTPResponseEncoder.lastChunk)
        default: whole(404, "no")
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) { connection.close() }
    func connectionClosed(_ connection: TCPConnection, error: NetError?) {}
}

@Suite("HTTP client (Protocol/http.md, \"Client\")")
struct HTTPClientTests {
    /// A canned server on 127.0.0.1 and the endpoint to reach it; `accepted` counts connections.
    private func server(_ group: EventLoopGroup) async throws -> (TCPListener, HTTPEndpoint, Counter) {
        let accepted = Counter()
        let listener = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { tcp in
            accepted.add()
            tcp.start(handler: CannedServer())
        }
        return (listener, HTTPEndpoint(secure: false, host: "127.0.0.1", port: listener.boundAddress.port), accepted)
    }

    @Test func keptAliveConnectionsCarryManyRequests() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (listener, endpoint, accepted) = try await server(group)
        let client = HTTPClient(eventLoopGroup: group)
        for _ in 0..<20 {
            let r = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/hello"))
            #expect(r.status == 200 && r.body == Array("hello".utf8))
        }
        let c = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/chunked"))
        #expect(c.body == Array("abcde".utf8))
        #expect(accepted.value == 1, "one connection for every sequential request")
        await listener.close()
    }

    @Test func gzipRedirectsAndClose() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (listener, endpoint, accepted) = try await server(group)
        let client = HTTPClient(eventLoopGroup: group)
        let g = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/gzip"))
        #expect(g.body.count == 5000 && g.body.allSatisfy { $0 == UInt8(ascii: "z") })
        let r = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/redirect"))
        #expect(r.status == 200 && r.body == Array("hello".utf8))
        let p = try await client.execute(HTTPClientRequest(method: "POST", endpoint: endpoint, target: "/redirect", body: []))
        #expect(p.status == 302, "a POST's redirect is returned, not followed")
        let before = accepted.value
        let bye = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/close"))
        #expect(bye.body == Array("bye".utf8))
        _ = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/hello"))
        #expect(accepted.value == before + 1, "after Connection: close the next request opens a new connection")
        await listener.close()
    }

    @Test func concurrentRequestsStayWithinTheLimit() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let (listener, endpoint, accepted) = try await server(group)
        var config = HTTPClient.Configuration()
        config.maxConnectionsPerEndpoint = 3
        let client = HTTPClient(configuration: config, eventLoopGroup: group)
        try await withThrowingTaskGroup(of: Int.self) { tasks in
            for _ in 0..<60 {
                tasks.addTask { try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/hello")).status }
            }
            for try await status in tasks { #expect(status == 200) }
        }
        #expect(accepted.value <= 3)
        await listener.close()
    }

    @Test func silenceTimesOutAndStreamsArriveInPieces() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (listener, endpoint, _) = try await server(group)
        let client = HTTPClient(eventLoopGroup: group)
        await #expect(throws: HTTPClientError.timedOut) {
            _ = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/silent", timeout: 0.3))
        }
        let s = try await client.stream(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/feed"))
        var text = ""
        for try await piece in s.body { text += String(decoding: piece, as: UTF8.self) }
        #expect(text == "line 0\nline 1\nline 2\n")
        await listener.close()
    }

    @Test func expectContinueSendsTheBodyOnlyOnceAgreed() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (listener, endpoint, accepted) = try await server(group)
        let client = HTTPClient(eventLoopGroup: group)
        let body = [UInt8](repeating: 7, count: 100_000)
        let ok = try await client.execute(HTTPClientRequest(method: "PUT", endpoint: endpoint, target: "/expect",
                                                            headers: [("Expect", "100-continue")], body: body))
        #expect(ok.status == 200 && ok.body == Array("got 100000".utf8), "the body went after 100 Continue")
        let refused = try await client.execute(HTTPClientRequest(method: "PUT", endpoint: endpoint, target: "/refuse",
                                                                 headers: [("Expect", "100-continue")], body: body))
        #expect(refused.status == 413, "a final answer before the body is returned")
        let before = accepted.value
        _ = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/hello"))
        #expect(accepted.value == before + 1, "the refused connection is not used again")
        await listener.close()
    }

    @Test func unreachableAndInvalid() async throws {
        let client = HTTPClient()
        #expect(throws: HTTPClientError.self) { _ = try HTTPClientRequest(method: "GET", url: "ftp://x/") }
        // A port nothing listens on (bound then closed).
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (listener, endpoint, _) = try await server(group)
        await listener.close()
        await #expect(throws: HTTPClientError.transport(.connectionRefused)) {
            _ = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: "/"))
        }
    }
}
