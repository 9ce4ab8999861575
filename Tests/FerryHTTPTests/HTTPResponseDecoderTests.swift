import FerryHTTP
import Testing

@Suite("HTTP response decoding (Protocol/http.md, \"Responses\")")
struct HTTPResponseDecoderTests {
    /// The responses to `methods` in `text`, fed whole and then one byte at a time (both must
    /// agree), then the end of the connection.
    func responses(_ text: String, methods: [String]) throws -> [(Int, String)] {
        func run(_ chunks: [[UInt8]]) throws -> [(Int, String)] {
            var d = HTTPResponseDecoder()
            for m in methods { d.expectResponse(toMethod: m) }
            var events: [HTTPResponseDecoder.Event] = []
            for c in chunks { events += try d.feed(c) }
            events += try d.finish()
            var out: [(Int, String)] = []
            var status = 0
            var body: [UInt8] = []
            for e in events {
                switch e {
                case .head(let h): status = h.status; body = []
                case .body(let b): body += b
                case .end: out.append((status, String(decoding: body, as: UTF8.self)))
                case .interim: break
                }
            }
            return out
        }
        let bytes = Array(text.utf8)
        let whole = try run([bytes])
        let split = try run(bytes.map { [$0] })
        #expect(whole.map(\.0) == split.map(\.0) && whole.map(\.1) == split.map(\.1))
        return whole
    }

    @Test func lengthChunkedAndHeadOnOneConnection() throws {
        let text = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
            + "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"
            + "HTTP/1.1 204 No Content\r\n\r\n"
        let r = try responses(text, methods: ["GET", "POST", "HEAD", "DELETE"])
        #expect(r.map(\.0) == [200, 201, 200, 204])
        #expect(r.map(\.1) == ["hello", "abcde", "", ""])
    }

    @Test func interimResponsesAreSkipped() throws {
        let r = try responses("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", methods: ["PUT"])
        #expect(r.map(\.0) == [200] && r.map(\.1) == ["ok"])
    }

    @Test func aBodyWithoutLengthRunsUntilTheClose() throws {
        var d = HTTPResponseDecoder()
        d.expectResponse(toMethod: "GET")
        let events = try d.feed(Array("HTTP/1.0 200 OK\r\n\r\nall of it".utf8))
        #expect(events.count == 2)
        #expect(!d.keepAlive)
        #expect(try d.finish() == [.end])
    }

    @Test func persistence() throws {
        for (text, keep) in [("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
                             ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false),
                             ("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
                             ("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true)] {
            var d = HTTPResponseDecoder()
            d.expectResponse(toMethod: "GET")
            _ = try d.feed(Array(text.utf8))
            #expect(d.keepAlive == keep, "\(text)")
        }
    }

    @Test func brokenResponsesAreErrors() {
        let cases = ["HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 200 OK\nX: y\r\n\r\n"]
        for text in cases {
            var d = HTTPResponseDecoder()
            d.expectResponse(toMethod: "GET")
            #expect(throws: HTTPError.self, "\(text.debugDescription)") { _ = try d.feed(Array(text.utf8)) }
        }
        // Cut short: the connection ends inside a body.
        var d = HTTPResponseDecoder()
        d.expectResponse(toMethod: "GET")
        _ = try? d.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8))
        #expect(throws: HTTPError.self) { _ = try d.finish() }
        // Bytes with no request outstanding.
        var e = HTTPResponseDecoder()
        #expect(throws: HTTPError.self) { _ = try e.feed(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)) }
    }

    @Test func aBodyOverItsLimitIsRefused() {
        var d = HTTPResponseDecoder()
        d.expectResponse(toMethod: "GET", maxBodySize: 4)
        #expect(throws: HTTPError.self) { _ = try d.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".utf8)) }
        var c = HTTPResponseDecoder()
        c.expectResponse(toMethod: "GET", maxBodySize: 4)
        #expect(throws: HTTPError.self) { _ = try c.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\n".utf8)) }
    }

    @Test func gzipRoundTripsAndRefusesBombs() throws {
        let text = Array(String(repeating: "ferry ", count: 10_000).utf8)
        let packed = Gzip.encode(text)
        #expect(packed.count < text.count / 10)
        #expect(try Gzip.decode(packed, limit: text.count) == text)
        #expect(throws: Gzip.Failure.tooLarge(limit: 100)) { _ = try Gzip.decode(packed, limit: 100) }
        #expect(throws: Gzip.Failure.malformed) { _ = try Gzip.decode(packed.dropLast(4), limit: text.count) }
    }
}

@Suite("HTTP request decoding: switching protocols")
struct HTTPUpgradeDecodingTests {
    static let upgrade = "GET /db/_blipsync HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"

    @Test func bytesAfterAnUpgradeRequestWaitForTheDecision() throws {
        var d = HTTPRequestDecoder()
        let events = try d.feed(Array((Self.upgrade + "\u{81}\u{05}frame").utf8))
        #expect(events.count == 2, "the head and its end; the frame bytes are not parsed as HTTP")
        #expect(d.awaitsUpgradeDecision && !d.isIdle)
        #expect(try d.feed(Array("more".utf8)).isEmpty)
        #expect(d.takeUnread() == Array("\u{81}\u{05}framemore".utf8))
    }

    @Test func aDeclinedUpgradeGoesOnAsHTTP() throws {
        var d = HTTPRequestDecoder()
        let h2c = "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n"
        let events = try d.feed(Array((h2c + "GET /next HTTP/1.1\r\nHost: x\r\n\r\n").utf8))
        #expect(events.count == 2 && d.awaitsUpgradeDecision)
        let more = try d.declineUpgrade()
        guard case .head(let next)? = more.first else { Issue.record("no next request: \(more)"); return }
        #expect(next.target == "/next" && more.last == .end && d.isIdle)
    }

    @Test func anUpgradeFieldWithoutConnectionUpgradeIsNoSwitch() throws {
        var d = HTTPRequestDecoder()
        let events = try d.feed(Array("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(events.count == 4 && !d.awaitsUpgradeDecision)
    }
}
