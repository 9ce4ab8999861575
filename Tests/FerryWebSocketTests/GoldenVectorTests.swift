@testable import FerryWebSocket
import Testing

/// Protocol/vectors/websocket.hex, computed independently from RFC 6455, checked byte for byte
/// in both directions.
@Suite struct GoldenVectorTests {
    static let key: (UInt8, UInt8, UInt8, UInt8) = (0x37, 0xfa, 0x21, 0x3d)

    struct Case: Sendable, CustomStringConvertible {
        let name: String, fin: Bool, opcode: Opcode, masked: Bool, payload: [UInt8]
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(name: "text-unmasked-hello", fin: true, opcode: .text, masked: false, payload: Array("Hello".utf8)),
        Case(name: "text-masked-hello", fin: true, opcode: .text, masked: true, payload: Array("Hello".utf8)),
        Case(name: "text-fragment-1-unmasked", fin: false, opcode: .text, masked: false, payload: Array("Hel".utf8)),
        Case(name: "text-fragment-2-unmasked", fin: true, opcode: .continuation, masked: false, payload: Array("lo".utf8)),
        Case(name: "ping-unmasked-hello", fin: true, opcode: .ping, masked: false, payload: Array("Hello".utf8)),
        Case(name: "pong-masked-hello", fin: true, opcode: .pong, masked: true, payload: Array("Hello".utf8)),
        Case(name: "binary-16bit-256-unmasked", fin: true, opcode: .binary, masked: false, payload: pattern(256)),
        Case(name: "binary-16bit-256-masked", fin: true, opcode: .binary, masked: true, payload: pattern(256)),
        Case(name: "binary-64bit-65536-unmasked", fin: true, opcode: .binary, masked: false, payload: pattern(65536)),
        Case(name: "close-1000-bye-unmasked", fin: true, opcode: .close, masked: false,
             payload: FrameEncoder.closePayload(code: .normalClosure, reason: "bye")),
        Case(name: "close-1001-going-away-masked", fin: true, opcode: .close, masked: true,
             payload: FrameEncoder.closePayload(code: .goingAway, reason: "going away — bye")),
        Case(name: "close-empty-unmasked", fin: true, opcode: .close, masked: false, payload: []),
    ]

    @Test(arguments: cases)
    func encodes(_ c: Case) throws {
        let expected = try #require(goldenVectors[c.name], "vector \(c.name) missing")
        let header = FrameHeader(fin: c.fin, opcode: c.opcode, maskKey: c.masked ? Self.key : nil, payloadLength: c.payload.count)
        #expect(FrameEncoder.encode(header, payload: c.payload) == expected)
    }

    @Test(arguments: cases)
    func decodes(_ c: Case) throws {
        let bytes = try #require(goldenVectors[c.name])
        var decoder = FrameDecoder(role: c.masked ? .server : .client)
        // Byte by byte: the decoder must not care how the stream is cut.
        var frames: [Frame] = []
        for b in bytes {
            decoder.feed([b])
            if let f = try decoder.next() { frames.append(f) }
        }
        #expect(frames.count == 1)
        #expect(frames.first?.payload == c.payload)
        #expect(frames.first?.header.opcode == c.opcode)
        #expect(frames.first?.header.fin == c.fin)
    }

    @Test func handshakeAcceptValueMatchesRFC() {
        #expect(Handshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func handshakeRequestBytes() throws {
        let hs = ClientHandshake(subprotocols: ["chat", "superchat"], key: "dGhlIHNhbXBsZSBub25jZQ==")
        let expected = try #require(goldenVectors["handshake-request-chat"])
        #expect(hs.request(hostHeader: "server.example.com", target: "/chat") == expected)
        // And the server accepts exactly those bytes, offering both subprotocols in order.
        let req = try HTTPHeadParser.parseRequest(expected)
        let offer = try ServerHandshake.validate(req)
        #expect(offer.subprotocols == ["chat", "superchat"])
        #expect(offer.acceptValue == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func handshakeResponseBytes() throws {
        let expected = try #require(goldenVectors["handshake-response-chat"])
        #expect(ServerHandshake.acceptResponse(acceptValue: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", subprotocol: "chat") == expected)
        let hs = ClientHandshake(subprotocols: ["chat", "superchat"], key: "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(try hs.validate(HTTPHeadParser.parseResponse(expected)) == "chat")
    }

    @Test func stateMachineWritesServerFramesLikeTheVectors() throws {
        var out: [UInt8] = []
        let m = WebSocketStateMachine(role: .server) { out.append(contentsOf: $0) }
        Array("Hello".utf8).withUnsafeBytes { m.send(.text, $0) }
        #expect(out == goldenVectors["text-unmasked-hello"])
        out = []
        m.sendClose(code: .normalClosure, reason: "bye")
        #expect(out == goldenVectors["close-1000-bye-unmasked"])
    }
}
