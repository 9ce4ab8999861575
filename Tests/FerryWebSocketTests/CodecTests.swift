@_spi(Fuzzing) @testable import FerryWebSocket
import Testing

@Suite struct UTF8ValidatorTests {
    static let valid: [[UInt8]] = [
        [], Array("hello".utf8), Array("κόσμε".utf8), Array("😀 €".utf8),
        [0xEF, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF], [0xED, 0x9F, 0xBF], Array(repeating: 0x41, count: 100),
    ]
    static let invalid: [[UInt8]] = [
        [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
        [0xF5, 0x80, 0x80, 0x80], [0xFF], Array("hello".utf8) + [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65, 0x64, 0x69, 0x74, 0x65, 0x64],
    ]

    @Test(arguments: valid) func acceptsValid(_ bytes: [UInt8]) {
        #expect(bytes.withUnsafeBytes { UTF8Validator.isValid($0) })
        // Split at every point: incremental validation must agree.
        for cut in 0...bytes.count {
            var v = UTF8Validator()
            let ok = bytes.withUnsafeBytes { v.validate(UnsafeRawBufferPointer(rebasing: $0[..<cut])) && v.validate(UnsafeRawBufferPointer(rebasing: $0[cut...])) }
            #expect(ok && v.isComplete)
        }
    }

    @Test(arguments: invalid) func rejectsInvalid(_ bytes: [UInt8]) {
        #expect(!bytes.withUnsafeBytes { UTF8Validator.isValid($0) })
    }

    @Test func failsFastOnTheFirstBadByte() {
        // A truncated sequence is not an error yet; a byte that cannot continue it is, at once.
        var v = UTF8Validator()
        #expect(([0xF0, 0x90] as [UInt8]).withUnsafeBytes { v.validate($0) })
        #expect(!v.isComplete)
        #expect(!([0x41] as [UInt8]).withUnsafeBytes { v.validate($0) })
    }
}

/// The state machine driven with bytes only: no sockets.
@Suite struct StateMachineTests {
    final class Recorder {
        var out: [UInt8] = []
        var events: [String] = []
        var messages: [(MessageKind, [UInt8])] = []
        let machine: WebSocketStateMachine
        init(role: WebSocketRole = .server, config: WebSocketConfiguration = WebSocketConfiguration()) {
            machine = WebSocketStateMachine(role: role, configuration: config) { _ in }
            machine.output = { [unowned self] in self.out.append(contentsOf: $0) }
        }
        func feed(_ bytes: [UInt8], chunk: Int = Int.max) {
            var i = 0
            while i < bytes.count {
                var part = Array(bytes[i..<min(bytes.count, i + chunk)])
                part.withUnsafeMutableBytes { raw in
                    machine.receive(raw) { e in
                        switch e {
                        case let .message(k, p): messages.append((k, Array(p))); events.append("message")
                        case .ping: events.append("ping")
                        case .pong: events.append("pong")
                        case let .closeReceived(code, _): events.append("close \(code?.rawValue ?? 1005)")
                        case let .failed(err): events.append("failed \(err.closeCode.rawValue)")
                        }
                    }
                }
                i += chunk == Int.max ? bytes.count : chunk
            }
        }
    }

    static func masked(_ op: Opcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        FrameEncoder.encode(FrameHeader(fin: fin, opcode: op, maskKey: (9, 8, 7, 6), payloadLength: payload.count), payload: payload)
    }

    @Test(arguments: [1, 2, 3, 7, 1000])
    func fragmentedMessageWithInterleavedPingAnyChunking(chunk: Int) {
        let r = Recorder()
        let bytes = Self.masked(.text, Array("Hel".utf8), fin: false) + Self.masked(.ping, [1, 2])
            + Self.masked(.continuation, Array("lo ".utf8), fin: false) + Self.masked(.continuation, Array("wörld".utf8))
        r.feed(bytes, chunk: chunk)
        #expect(r.events == ["ping", "message"])
        #expect(r.messages.first?.1 == Array("Hello wörld".utf8))
        // The automatic pong carries the ping's payload, unmasked (server side).
        #expect(r.out == [0x8A, 0x02, 1, 2])
    }

    /// A one-frame message split across reads is unmasked straight into the message buffer
    /// (`directFill`): the payload must come out exact at any cut, key phase and kind, text must
    /// still be validated across the cuts, and the next message must start clean.
    @Test(arguments: [1, 3, 4, 5, 64, 4095])
    func aMaskedFrameSplitAcrossReadsArrivesExact(chunk: Int) {
        let r = Recorder()
        let binary = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let text = Array(String(repeating: "wörld κόσμε 😀 ", count: 300).utf8)
        r.feed(Self.masked(.binary, binary) + Self.masked(.text, text) + Self.masked(.binary, [1, 2, 3]), chunk: chunk)
        #expect(r.events == ["message", "message", "message"])
        let exact = r.messages.map(\.1) == [binary, text, [1, 2, 3]]   // a Bool: a mismatch would print 30 KB
        #expect(exact)
        #expect(r.messages.map(\.0) == [.binary, .text, .binary])

        let bad = Recorder()
        bad.feed(Self.masked(.text, Array(repeating: 0x61, count: 5000) + [0xED, 0xA0, 0x80] + Array(repeating: 0x61, count: 100)),
                 chunk: chunk)
        #expect(bad.events == ["failed 1007"])
    }

    @Test func closeIsEchoedWithTheSameCode() {
        let r = Recorder()
        r.feed(Self.masked(.close, FrameEncoder.closePayload(code: CloseCode(4001), reason: "done")))
        #expect(r.events == ["close 4001"])
        #expect(r.out == [0x88, 0x02, 0x0F, 0xA1])
        #expect(r.machine.closeState == .closed)
    }

    static let badInputs: [([UInt8], UInt16)] = [
        ([0x88, 0x81, 1, 2, 3, 4, 0x55] as [UInt8], 1002 as UInt16),           // 1-byte close payload
        (masked(.close, [0x03, 0xED]), 1002),                                    // code 1005 on the wire
        (masked(.close, [0x03, 0xE8, 0xFF]), 1007),                              // reason not UTF-8
        ([0x83, 0x80, 1, 2, 3, 4], 1002),                                        // reserved opcode 3
        ([0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f], 1002),                      // unmasked client frame
        ([0xC1, 0x80, 1, 2, 3, 4], 1002),                                        // RSV1 without extension
        (masked(.continuation, [1]), 1002),                                      // continuation first
        (masked(.text, [0xC0, 0x80]), 1007),                                     // overlong encoding
        (masked(.ping, Array(repeating: 0, count: 126)), 1002),                  // control frame > 125
        (masked(.ping, [], fin: false), 1002),                                   // fragmented control
        ([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], 1002),             // 64-bit length, MSB set
    ]

    @Test(arguments: badInputs)
    func badInputFailsWithTheRightCode(bytes: [UInt8], code: UInt16) {
        let r = Recorder()
        r.feed(bytes)
        #expect(r.events == ["failed \(code)"])
        #expect(closeCode(serverFrames(r.out)) == code)
    }

    @Test func oversizeFrameAndMessageClose1009() {
        var config = WebSocketConfiguration()
        config.maxFrameSize = 100
        config.maxMessageSize = 150
        let tooBigFrame = Recorder(config: config)
        tooBigFrame.feed(Self.masked(.binary, pattern(101)))
        #expect(tooBigFrame.events == ["failed 1009"])
        let tooBigMessage = Recorder(config: config)
        tooBigMessage.feed(Self.masked(.binary, pattern(100), fin: false) + Self.masked(.continuation, pattern(60)))
        #expect(tooBigMessage.events == ["failed 1009"])
        // The limit is checked from the header: the 1009 goes out before the payload arrives.
        let early = Recorder(config: config)
        early.feed(Array(Self.masked(.binary, pattern(101)).prefix(8)))
        #expect(early.events == ["failed 1009"])
    }

    @Test func invalidUTF8FailsBeforeTheFrameEnds() {
        let r = Recorder()
        let frame = Self.masked(.text, Array("abc".utf8) + [0xFF] + Array(repeating: 0x61, count: 1000))
        r.feed(Array(frame.prefix(20)))   // header + first bytes only
        #expect(r.events == ["failed 1007"])
    }

    @Test func clientMasksEveryFrameWithAFreshKey() {
        let r = Recorder(role: .client)
        for _ in 0..<2 { Array("same".utf8).withUnsafeBytes { r.machine.send(.text, $0) } }
        var d = FrameDecoder(role: .server)
        d.feed(r.out)
        let a = try? d.next(), b = try? d.next()
        #expect(a?.payload == Array("same".utf8) && b?.payload == Array("same".utf8))
        #expect(Array(r.out[2..<6]) != Array(r.out[12..<16]))
    }

    @Test func messagesAfterCloseAreIgnored() {
        let r = Recorder()
        r.feed(Self.masked(.close, [0x03, 0xE8]) + Self.masked(.text, Array("late".utf8)))
        #expect(r.events == ["close 1000"])
    }
}

/// The vectorised masking against the definition (RFC 6455 §5.3: byte i XOR key[i mod 4]), for
/// every starting phase and lengths around each block size, in place and copying.
@Suite struct MaskingTests {
    static func reference(_ bytes: [UInt8], key: [UInt8], phase: Int) -> [UInt8] {
        bytes.enumerated().map { $0.element ^ key[($0.offset + phase) & 3] }
    }

    @Test(arguments: [0, 1, 2, 3])
    func masksLikeTheDefinitionAtEveryPhaseAndLength(phase: Int) {
        let key: (UInt8, UInt8, UInt8, UInt8) = (0x9A, 0x01, 0xF0, 0x5C)
        let keyBytes = [key.0, key.1, key.2, key.3]
        for length in Array(0...80) + [127, 128, 129, 1000, 4099] {
            let source = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 73 &+ 11) }
            let want = Self.reference(source, key: keyBytes, phase: phase)
            var inPlace = source
            let next = inPlace.withUnsafeMutableBytes { Masking.apply(key: key, to: $0, phase: phase) }
            var copied = [UInt8](repeating: 0, count: length)
            let nextCopy = copied.withUnsafeMutableBytes { dst in
                source.withUnsafeBytes { Masking.copy(key: key, from: $0, to: dst.baseAddress ?? UnsafeMutableRawPointer(bitPattern: 1)!, phase: phase) }
            }
            #expect(inPlace == want, "in place, length \(length)")
            #expect(copied == want, "copy, length \(length)")
            #expect(length == 0 || (next == (phase + length) & 3 && nextCopy == next), "next phase, length \(length)")
        }
    }
}
