import FerryHTTP
import FerryTestSupport
import Testing

@Suite("HTTP responses, byte for byte (Protocol/vectors/http.hex)")
struct HTTPResponseEncoderTests {
    let v = namedHexVectors("http.hex")

    @Test func wholeResponsesCarryTheirLength() {
        let json = [("Content-Type", "application/json")]
        #expect(HTTPResponseEncoder.encode(HTTPResponseHead(status: 200, headers: json), body: Array(#"{"ok":true}"#.utf8))
                == v["response-200-json"])
        #expect(HTTPResponseEncoder.encode(HTTPResponseHead(status: 201, headers: [("ETag", #""1-abc""#)])) == v["response-201-etag"])
        #expect(HTTPResponseEncoder.encode(HTTPResponseHead(status: 404, headers: json),
                                           body: Array(#"{"error":"not_found","reason":"missing"} "#.utf8), head: true)
                == v["response-404-head"], "HEAD: the length of the body, not the body")
    }

    @Test func bodilessStatusesHaveNoLengthAndNoBody() {
        #expect(HTTPResponseEncoder.encode(HTTPResponseHead(status: 204, headers: [("Server", "Ferry")]), body: [1, 2, 3])
                == v["response-204"])
        #expect(HTTPResponseEncoder.encode(HTTPResponseHead(status: 304, headers: [("ETag", #""2-def""#)])) == v["response-304"])
        #expect(HTTPResponseEncoder.continueResponse == v["continue"])
    }

    @Test func chunkedBodies() {
        #expect(HTTPResponseEncoder.encodeChunkedHead(HTTPResponseHead(status: 200, headers: [("Content-Type", "application/json")]))
                == v["response-chunked-head"])
        #expect(HTTPResponseEncoder.chunk(Array("hello".utf8)) == v["chunk-hello"])
        #expect(HTTPResponseEncoder.chunk(Array(repeating: UInt8(ascii: "x"), count: 1024)) == v["chunk-1k"])
        #expect(HTTPResponseEncoder.chunk([]) == [], "an empty chunk would end the body")
        #expect(HTTPResponseEncoder.lastChunk == v["last-chunk"])
    }

    @Test func aValueCannotSplitTheResponse() {
        let bytes = HTTPResponseEncoder.encode(HTTPResponseHead(status: 200, headers: [("X-Doc", "a\r\nSet-Cookie: x=1")]))
        #expect(String(decoding: bytes, as: UTF8.self).contains("X-Doc: aSet-Cookie: x=1\r\n"))
    }
}
