import FerryHTTP
import FerryTestSupport
import Testing

@Suite("HTTP request decoding (Protocol/http.md, \"Requests\")")
struct HTTPRequestDecoderTests {
    let v = namedHexVectors("http.hex")

    /// The requests of `bytes`, fed whole and then one byte at a time: both must give the same.
    func requests(_ bytes: [UInt8], limits: HTTPLimits = HTTPLimits()) throws -> [(HTTPRequestHead, [UInt8])] {
        func collect(_ events: [HTTPRequestDecoder.Event]) -> [(HTTPRequestHead, [UInt8])] {
            var out: [(HTTPRequestHead, [UInt8])] = []
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            for e in events {
                switch e {
                case .head(let h): head = h; body = []
                case .body(let b): body += b
                case .end: if let h = head { out.append((h, body)) }; head = nil
                }
            }
            return out
        }
        var whole = HTTPRequestDecoder(limits: limits)
        let a = collect(try whole.feed(bytes))
        var split = HTTPRequestDecoder(limits: limits)
        var events: [HTTPRequestDecoder.Event] = []
        for b in bytes { events += try split.feed([b]) }
        let b = collect(events)
        #expect(a.map(\.0) == b.map(\.0) && a.map(\.1) == b.map(\.1), "whole and byte-by-byte decoding differ")
        #expect(whole.isIdle && split.isIdle)
        return a
    }

    func error(_ text: String, limits: HTTPLimits = HTTPLimits()) -> HTTPError? {
        var d = HTTPRequestDecoder(limits: limits)
        do { _ = try d.feed(Array(text.utf8)); return nil } catch { return error }
    }

    @Test func aGetWithHeaders() throws {
        let r = try requests(try #require(v["request-get"]))
        #expect(r.count == 1)
        let head = try #require(r.first?.0)
        #expect(head.method == "GET" && head.target == "/db/doc?rev=1-a" && head.minorVersion == 1)
        #expect(head["host"] == "localhost:4984" && head["ACCEPT"] == "application/json")
        #expect(head.keepAlive && !head.expectsContinue && head.body == .none)
    }

    @Test func bodiesByLengthAndByChunks() throws {
        let put = try requests(try #require(v["request-put-length"]))
        #expect(put.first?.0.body == .length(11))
        #expect(put.first?.1 == Array(#"{"v":"abc"}"#.utf8))
        let post = try requests(try #require(v["request-post-chunked"]))
        #expect(post.first?.0.body == .chunked)
        #expect(post.first?.1 == Array(#"{"docs":[{}]} "#.utf8), "chunks joined, extensions and trailers dropped")
    }

    @Test func pipelinedRequestsComeOutInOrder() throws {
        let r = try requests(try #require(v["request-pipelined"]))
        #expect(r.map(\.0.method) == ["GET", "DELETE", "GET"])
        #expect(r.map(\.0.target) == ["/a", "/b?rev=1-a", "/c"])
        #expect(r.map(\.0.keepAlive) == [true, true, false], "HTTP/1.0 closes unless asked to keep alive")
    }

    @Test func expectContinue() throws {
        let r = try requests(try #require(v["request-expect-continue"]))
        #expect(r.first?.0.expectsContinue == true)
        #expect(r.first?.1 == Array("abc".utf8))
        #expect(error("PUT / HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\nContent-Length: 1\r\n\r\nx")?.status == 417)
    }

    @Test func persistence() throws {
        let close = try requests(Array("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n".utf8))
        #expect(close.first?.0.keepAlive == false)
        let keep = try requests(Array("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n".utf8))
        #expect(keep.first?.0.keepAlive == true)
    }

    @Test(arguments: [
        ("GET /\r\n\r\n", 400, "no version"),
        ("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "two spaces"),
        ("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "HTTP/2 on an HTTP/1 connection"),
        ("GET / HTTP/1.1\r\n\r\n", 400, "no Host"),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Hosts"),
        ("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "space before the colon"),
        ("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "obsolete folding"),
        ("GET / HTTP/1.1\nHost: h\r\n\r\n", 400, "bare LF"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\u{1}b\r\n\r\n", 400, "control byte in a value"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both framings (smuggling)"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "differing lengths"),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400, "negative length"),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "unknown transfer coding"),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "chunked in HTTP/1.0"),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 400, "bad chunk size"),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", 400, "chunk without its CRLF"),
    ] as [(String, Int, String)])
    func malformedRequestsAreRefusedWithTheirStatus(_ text: String, _ status: Int, _ why: String) {
        #expect(error(text)?.status == status, Comment(rawValue: why))
    }

    @Test func limits() {
        var small = HTTPLimits()
        small.maxHeadSize = 64
        small.maxBodySize = 10
        small.maxHeaderCount = 2
        #expect(error("GET / HTTP/1.1\r\nHost: h\r\nX-Long: \(String(repeating: "a", count: 100))\r\n\r\n", limits: small)?.status == 431)
        #expect(error("GET / HTTP/1.1\r\nHost: h\r\nX-Long: \(String(repeating: "a", count: 100))", limits: small)?.status == 431,
                "refused before the head is complete")
        #expect(error("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits: small)?.status == 431)
        #expect(error("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", limits: small)?.status == 413)
        #expect(error("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n", limits: small)?.status == 413,
                "a chunked body is counted as it comes")
        #expect(error("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n")?.status == 413)
    }

    @Test func aFailedDecoderStaysFailed() throws {
        var d = HTTPRequestDecoder()
        #expect(throws: HTTPError.self) { try d.feed(Array("BAD\r\n\r\n".utf8)) }
        #expect(throws: HTTPError.self) { try d.feed(Array("GET / HTTP/1.1\r\nHost: h\r\n\r\n".utf8)) }
    }

    @Test func emptyLinesBeforeARequestAreIgnoredAndABodyComesInPieces() throws {
        var d = HTTPRequestDecoder()
        var events = try d.feed(Array("\r\nPUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabc".utf8))
        #expect(events.count == 2)
        #expect(events.last == .body(Array("abc".utf8)))
        #expect(!d.isIdle)
        events = try d.feed(Array("def".utf8))
        #expect(events == [.body(Array("def".utf8)), .end])
        #expect(d.isIdle)
    }
}
