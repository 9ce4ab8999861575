@_spi(Fuzzing) @testable import FerryWebSocket
import Testing

@Suite struct HandshakeTests {
    static func request(_ lines: [String], method: String = "GET", version: String = "HTTP/1.1") -> [UInt8] {
        Array(("\(method) /x \(version)\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n").utf8)
    }
    static let good = ["Host: h", "Upgrade: websocket", "Connection: keep-alive, Upgrade",
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]

    static func status(_ bytes: [UInt8]) -> Int? {
        do {
            _ = try ServerHandshake.validate(try ServerHandshake.parseRequest(bytes))
            return nil
        } catch let WebSocketError.badHandshake(status, _) {
            return status
        } catch { return -1 }
    }

    @Test func acceptsAValidRequestWithTokenLists() {
        #expect(Self.status(Self.request(Self.good)) == nil)
    }

    static let refusals: [([UInt8], Int)] = [
        (request(good, method: "POST"), 405),
        (request(good, version: "HTTP/1.0"), 400),
        (request(good.filter { !$0.hasPrefix("Host") }), 400),
        (request(good.filter { !$0.hasPrefix("Upgrade") }), 426),
        (request(good.filter { !$0.hasPrefix("Connection") }), 400),
        (request(good.filter { !$0.hasPrefix("Sec-WebSocket-Version") } + ["Sec-WebSocket-Version: 8"]), 426),
        (request(good.filter { !$0.hasPrefix("Sec-WebSocket-Key") } + ["Sec-WebSocket-Key: c2hvcnQ="]), 400),
        (request(good + ["Bad Header: x"]), 400),
        (Array("GARBAGE\r\n\r\n".utf8), 400),
    ]

    @Test(arguments: refusals)
    func refusesWithTheRightStatus(bytes: [UInt8], status: Int) {
        #expect(Self.status(bytes) == status)
    }

    @Test func headLimitIsEnforcedWhileBuffering() {
        var p = HTTPHeadAccumulator(maxSize: 64)
        let chunk = Array(repeating: UInt8(ascii: "a"), count: 65)
        #expect(throws: HTTPError.self) { try chunk.withUnsafeBytes { try p.feed($0) } }
    }

    @Test func clientChecksStatusAcceptAndSubprotocol() throws {
        let hs = ClientHandshake(subprotocols: ["BLIP_3+CBMobile_3"], key: "dGhlIHNhbXBsZSBub25jZQ==")
        func response(_ status: String, _ headers: [String]) throws -> HTTPResponseHead {
            try ClientHandshake.parseResponse(Array(("HTTP/1.1 \(status)\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n").utf8))
        }
        let base = ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="]
        #expect(try hs.validate(response("101 Switching Protocols", base + ["Sec-WebSocket-Protocol: BLIP_3+CBMobile_3"])) == "BLIP_3+CBMobile_3")
        #expect(try hs.validate(response("101 Switching Protocols", base)) == nil)
        #expect(throws: WebSocketError.self) { try hs.validate(response("101 Switching Protocols", base + ["Sec-WebSocket-Protocol: other"])) }
        #expect(throws: WebSocketError.self) { try hs.validate(response("101 Switching Protocols", ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: wrong="])) }
        #expect(throws: WebSocketError.self) { try hs.validate(response("200 OK", base)) }
        #expect(throws: WebSocketError.self) { try hs.validate(response("101 Switching Protocols", base + ["Sec-WebSocket-Extensions: permessage-deflate"])) }
    }

    @Test func urlParsing() throws {
        let u = try WebSocketURL("ws://[::1]:4984/db/_blipsync?x=1")
        #expect(u.host == "::1" && u.port == 4984 && u.target == "/db/_blipsync?x=1" && u.hostHeader == "[::1]:4984")
        #expect(try WebSocketURL("ws://example.com").target == "/")
        #expect(throws: WebSocketError.self) { try WebSocketURL("http://example.com/") }
    }

    @Test func negotiationPrefersTheClientsOrder() throws {
        let req = try ServerHandshake.parseRequest(Self.request(Self.good + ["Sec-WebSocket-Protocol: BLIP_3+CBMobile_4, BLIP_3+CBMobile_3"]))
        let offer = try ServerHandshake.validate(req)
        let up = UpgradeRequest(head: req, offeredSubprotocols: offer.subprotocols, remoteAddress: nil)
        #expect(up.negotiateSubprotocol(["BLIP_3+CBMobile_3", "BLIP_3+CBMobile_4"]) == "BLIP_3+CBMobile_4")
        #expect(up.negotiateSubprotocol(["BLIP_3+CBMobile_3"]) == "BLIP_3+CBMobile_3")
        #expect(up.negotiateSubprotocol(["chat"]) == nil)
    }
}
