@_spi(Fuzzing) @testable import FerryWebSocket
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
        let req = try ServerHandshake.parseRequest(expected)
        let offer = try ServerHandshake.validate(req)
        #expect(offer.subprotocols == ["chat", "superchat"])
        #expect(offer.acceptValue == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func handshakeResponseBytes() throws {
        let expected = try #require(goldenVectors["handshake-response-chat"])
        #expect(ServerHandshake.acceptResponse(acceptValue: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", subprotocol: "chat") == expected)
        let hs = ClientHandshake(subprotocols: ["chat", "superchat"], key: "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(try hs.validate(ClientHandshake.parseResponse(expected)) == "chat")
    }

    // MARK: permessage-deflate (RFC 7692 §7.2.3)

    /// The agreement both sides reach for the default offer, optionally with the server resetting.
    static func deflateAgreement(_ role: WebSocketRole, serverNoContextTakeover: Bool = false) -> PerMessageDeflateAgreement {
        var response = PerMessageDeflateParameters()
        response.serverNoContextTakeover = serverNoContextTakeover
        return PerMessageDeflateAgreement(role: role, response: response, options: PerMessageDeflateOptions())
    }

    @Test func deflateEncodesLikeTheRFC() {
        var out: [UInt8] = []
        let m = WebSocketStateMachine(role: .server, deflate: Self.deflateAgreement(.server)) { out.append(contentsOf: $0) }
        Array("Hello".utf8).withUnsafeBytes { m.send(.text, $0) }
        #expect(out == goldenVectors["deflate-hello-unmasked"])
        // Context takeover: the second "Hello" is a back-reference into the first.
        out = []
        Array("Hello".utf8).withUnsafeBytes { m.send(.text, $0) }
        #expect(out == goldenVectors["deflate-hello-again-unmasked"])
        out = []
        m.send(.binary, UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(out == goldenVectors["deflate-empty-unmasked"])
    }

    @Test func deflateNoContextTakeoverStartsEveryMessageAfresh() {
        var out: [UInt8] = []
        let m = WebSocketStateMachine(role: .server, deflate: Self.deflateAgreement(.server, serverNoContextTakeover: true)) {
            out.append(contentsOf: $0)
        }
        for _ in 0..<3 {
            out = []
            Array("Hello".utf8).withUnsafeBytes { m.send(.text, $0) }
            #expect(out == goldenVectors["deflate-hello-unmasked"])
        }
    }

    struct DeflateCase: Sendable, CustomStringConvertible {
        let vectors: [String], role: WebSocketRole, messages: [WebSocketMessage]
        var description: String { vectors.joined(separator: "+") }
    }

    static let deflateCases: [DeflateCase] = [
        DeflateCase(vectors: ["deflate-hello-unmasked", "deflate-hello-again-unmasked"], role: .client, messages: [.text("Hello"), .text("Hello")]),
        DeflateCase(vectors: ["deflate-hello-masked"], role: .server, messages: [.text("Hello")]),
        DeflateCase(vectors: ["deflate-hello-fragment-1-unmasked", "deflate-hello-fragment-2-unmasked"], role: .client, messages: [.text("Hello")]),
        DeflateCase(vectors: ["deflate-hello-stored-unmasked"], role: .client, messages: [.text("Hello")]),
        // After a final block the context starts afresh; the next message still inflates.
        DeflateCase(vectors: ["deflate-hello-bfinal-unmasked", "deflate-hello-unmasked"], role: .client, messages: [.text("Hello"), .text("Hello")]),
        DeflateCase(vectors: ["deflate-hello-two-blocks-unmasked"], role: .client, messages: [.text("Hello")]),
        DeflateCase(vectors: ["deflate-empty-unmasked", "deflate-hello-unmasked"], role: .client, messages: [.binary([]), .text("Hello")]),
    ]

    @Test(arguments: deflateCases)
    func deflateDecodes(_ c: DeflateCase) throws {
        var bytes: [UInt8] = []
        for name in c.vectors { bytes += try #require(goldenVectors[name], "vector \(name) missing") }
        // Whole, then byte by byte: the inflater must not care how the stream is cut.
        for step in [bytes.count, 1] {
            let m = WebSocketStateMachine(role: c.role, deflate: Self.deflateAgreement(c.role)) { _ in }
            var got: [WebSocketMessage] = []
            var failure: WebSocketError?
            var offset = 0
            while offset < bytes.count {
                var piece = Array(bytes[offset..<min(offset + step, bytes.count)])
                offset += step
                piece.withUnsafeMutableBytes { raw in
                    m.receive(raw) { event in
                        switch event {
                        case let .message(kind, payload):
                            got.append(kind == .text ? .text(String(decoding: payload, as: UTF8.self)) : .binary(Array(payload)))
                        case .failed(let e): failure = e
                        default: break
                        }
                    }
                }
            }
            #expect(failure == nil, "step \(step)")
            #expect(got == c.messages, "step \(step)")
        }
    }

    @Test func deflateHandshakeBytes() throws {
        let hs = ClientHandshake(permessageDeflate: PerMessageDeflateOptions(), key: "dGhlIHNhbXBsZSBub25jZQ==")
        let request = try #require(goldenVectors["handshake-request-deflate"])
        #expect(hs.request(hostHeader: "server.example.com", target: "/chat") == request)
        let offer = try ServerHandshake.validate(ServerHandshake.parseRequest(request))
        var serverOptions = PerMessageDeflateOptions(serverNoContextTakeover: true)
        serverOptions.clientMaxWindowBits = 10
        let accepted = try #require(PerMessageDeflateNegotiation.serverAccept(offers: offer.extensions, options: serverOptions))
        let response = try #require(goldenVectors["handshake-response-deflate"])
        #expect(ServerHandshake.acceptResponse(acceptValue: offer.acceptValue, subprotocol: nil, extensions: accepted.header) == response)
        #expect(accepted.agreement.sendNoContextTakeover && accepted.agreement.receiveMaxWindowBits == 10)
        let client = try #require(try hs.negotiatedDeflate(ClientHandshake.parseResponse(response)))
        #expect(client.receiveNoContextTakeover && !client.sendNoContextTakeover)
        #expect(client.sendMaxWindowBits == 10 && client.receiveMaxWindowBits == 15)
        #expect(try hs.validate(ClientHandshake.parseResponse(response)) == nil)
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
