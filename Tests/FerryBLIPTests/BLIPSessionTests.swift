@_spi(Fuzzing) @testable import FerryBLIP
import FerryTestSupport
import Foundation
import Testing

@Suite struct BLIPCodecTests {
    @Test func varints() throws {
        #expect(Varint.encode(127) == [0x7f])
        #expect(Varint.encode(128) == [0x80, 0x01])
        #expect(Varint.encode(300) == [0xac, 0x02])
        #expect(try ([0xdc, 0xdf, 0x03] as [UInt8]).withUnsafeBytes { try Varint.read($0, at: 0) }?.0 == 61_404)
        #expect(try ([0x80] as [UInt8]).withUnsafeBytes { try Varint.read($0, at: 0) } == nil)
        #expect(throws: BLIPError.self) { try [UInt8](repeating: 0xff, count: 11).withUnsafeBytes { try Varint.read($0, at: 0) } }
    }

    @Test func properties() throws {
        let p: BLIPProperties = ["Profile": "rev", "id": "doc1"]
        #expect(p.encoded() == Array("Profile\0rev\0id\0doc1\0".utf8))
        #expect(try p.encoded().withUnsafeBytes { try BLIPProperties.decode($0) } == p)
        for bad in ["Profile\0rev", "a\0b\0c\0", "a\0b\0a\0c\0"] {
            #expect(throws: BLIPError.self) { try Array(bad.utf8).withUnsafeBytes { try BLIPProperties.decode($0) } }
        }
        #expect(BLIPProperties([("continuous", "YES")]).bool("continuous") && !BLIPProperties([("x", "false")]).bool("x"))
        // UTF-8 is checked per string: multi-byte text passes, a stray or truncated byte does not.
        let text: BLIPProperties = ["name": "Zoë — 東京 🚢"]
        #expect(try text.encoded().withUnsafeBytes { try BLIPProperties.decode($0) } == text)
        for bad: [UInt8] in [[0x6b, 0x00, 0xff, 0x00], [0x6b, 0x00, 0xe6, 0x9d, 0x00], [0xc0, 0xaf, 0x00, 0x76, 0x00]] {
            #expect(throws: BLIPError.self) { try bad.withUnsafeBytes { try BLIPProperties.decode($0) } }
        }
    }

    /// The direct framing a connection uses when nothing is queued writes exactly the frames
    /// the queue would, and declines what the queue must handle.
    @Test func frameWholeMatchesTheQueuedFrames() throws {
        let queued = BLIPSession(), direct = BLIPSession()
        let messages: [BLIPMessage] = [
            .request(profile: "echo", body: [1, 2, 3]),
            .request(profile: "rev", properties: [("id", "doc"), ("rev", "1-ab")], body: Array(repeating: 7, count: 4000)),
            .request(profile: "none", urgent: true),
            .request(profile: "big", body: Array(repeating: 1, count: BLIPConstants.maxFrameSize - 30)),
        ]
        for m in messages {
            queued.send(request: m)
            let queuedFrame = try #require(try queued.nextFrame())
            let (number, flags) = direct.numberRequest(m)
            var head: [UInt8] = [9, 9]
            var frame: [UInt8] = []
            #expect(direct.frameWhole(type: .request, number: number, flags: flags, message: m, into: &head) {
                frame = Array($0) + Array($1) + Array($2)
            })
            #expect(frame == queuedFrame)
        }
        #expect(direct.messageBytesSent == queued.messageBytesSent)
        var frame: [UInt8] = []
        let tooBig = BLIPMessage.request(profile: "big", body: Array(repeating: 1, count: BLIPConstants.maxFrameSize))
        let (n1, f1) = direct.numberRequest(tooBig)
        #expect(!direct.frameWhole(type: .request, number: n1, flags: f1, message: tooBig, into: &frame) { _, _, _ in })
        let packed = BLIPMessage.request(profile: "z", body: [1], compressed: true)
        #expect(!direct.frameWhole(type: .request, number: n1 + 1, flags: packed.flags, message: packed, into: &frame) { _, _, _ in })
        // With a message queued, the next one must wait behind it.
        direct.enqueue(OutgoingMessage(type: .request, number: n1, flags: f1, message: tooBig))
        let small = BLIPMessage.request(profile: "echo")
        let (n2, f2) = direct.numberRequest(small)
        #expect(!direct.frameWhole(type: .request, number: n2, flags: f2, message: small, into: &frame) { _, _, _ in })
        #expect(frame.isEmpty)
    }
}

/// Protocol/vectors/blip.hex, byte for byte, both directions.
@Suite struct BLIPGoldenVectorTests {
    @Test func encodesTheReferenceExamples() throws {
        let s = BLIPSession()
        s.send(request: .request(profile: "getCheckpoint", properties: [("client", "cp-abc")]))
        s.send(request: .request(profile: "changes", body: Array(#"[[1,"doc1","1-abc"]]"#.utf8), urgent: true, compressed: true))
        let frames = try s.drain()
        #expect(frames.count == 2)
        #expect(frames.first == blipVectors["ref-2.7-getCheckpoint"])
        #expect(frames.last == blipVectors["ref-2.8-changes-compressed"])
    }

    @Test func decodesTheReferenceExamples() throws {
        let s = BLIPSession()
        let m1 = try #require(try s.receive(try vec("ref-2.7-getCheckpoint")))
        #expect(m1.profile == "getCheckpoint" && m1.properties["client"] == "cp-abc" && m1.number == 1)
        let m2 = try #require(try s.receive(try vec("ref-2.8-changes-compressed")))
        #expect(m2.profile == "changes" && m2.isUrgent && m2.isCompressed && m2.body == Array(#"[[1,"doc1","1-abc"]]"#.utf8))
    }

    @Test func decodesGoBlipCaptures() throws {
        // As go-blip's peer: its requests, including a stored-block deflate frame.
        let server = BLIPSession()
        let r1 = try #require(try server.receive(try vec("goblip-msg1")))
        #expect(r1.properties == ["Profile": "echo", "X-Case": "small-plain"] && r1.body == Array("hello".utf8))
        let r2 = try #require(try server.receive(try vec("goblip-msg2")))
        #expect(r2.properties["X-Case"] == "small-compressed" && r2.body == Array("hello".utf8))
        // Echoing them reproduces go-blip's own response bytes (uncompressed RPY #1).
        try server.send(response: BLIPMessage(type: .response, properties: r1.properties, body: r1.body), to: 1)
        #expect(try server.nextFrame() == blipVectors["goblip-rpy1"])

        // As go-blip's client: its responses and an error response.
        let client = BLIPSession()
        for _ in 0..<3 { client.send(request: .request(profile: "echo")) }
        _ = try client.drain()
        #expect(try client.receive(try vec("goblip-rpy1"))?.body == Array("hello".utf8))
        #expect(try client.receive(try vec("goblip-rpy2"))?.isCompressed == true)
        let err = try #require(try client.receive(try vec("goblip-err3")))
        #expect(err.error?.domain == "BLIPTest" && err.error?.code == 418 && err.error?.message == "requested error")
    }

    @Test func ackFrameMatchesGoBlip() throws {
        // An ACK is generated after 50,000 received bytes; check the wire shape with go-blip's.
        let ack = try vec("goblip-ack6")
        var mine: [UInt8] = []
        Varint.write(6, into: &mine)
        mine.append(BLIPFlags(type: .ackRequest, [.urgent, .noReply]).rawValue)
        Varint.write(61_404, into: &mine)
        #expect(mine == ack)
    }
}

@Suite struct BLIPSessionTests {
    /// Moves every sendable frame from `a` to `b`; returns the messages `b` completed.
    static func pump(_ a: BLIPSession, _ b: BLIPSession) throws -> [BLIPMessage] {
        try a.drain().compactMap { try b.receive($0) }
    }

    @Test(arguments: [false, true])
    func multiFrameRoundTrip(compressed: Bool) throws {
        let a = BLIPSession(), b = BLIPSession()
        let body = jsonLikeBody(100_000)
        a.send(request: .request(profile: "big", properties: [("n", "1")], body: body, compressed: compressed))
        var got: [BLIPMessage] = []
        // Flow control: b ACKs, a thaws; loop until everything crossed.
        for _ in 0..<100 where got.isEmpty {
            got += try Self.pump(a, b)
            _ = try Self.pump(b, a)
        }
        #expect(got.count == 1 && got.first?.body == body && got.first?.isCompressed == compressed)
        try b.send(response: BLIPMessage(type: .response, body: Array("ok".utf8)), to: 1)
        #expect(try Self.pump(b, a).first?.body == Array("ok".utf8))
    }

    /// Multi-frame messages around the 1 MiB head (`IncomingMessage.separateBody`), plain and
    /// compressed (where one inflated frame can cross it), arrive byte for byte with their
    /// properties; a body much smaller than its reservation is handed over without the spare
    /// capacity.
    @Test(arguments: [false, true])
    func bodiesAroundTheHeadBoundaryArriveIntact(compressed: Bool) throws {
        var config = BLIPConfiguration()
        config.maxMessageSize = 8 << 20
        let a = BLIPSession(configuration: config), b = BLIPSession(configuration: config)
        let mib = 1 << 20
        for size in [mib - 40, mib - 1, mib, mib + 1, mib + 16_385, 3 * mib + 7] {
            let body = compressed ? jsonLikeBody(size) : noiseBody(size)
            a.send(request: .request(profile: "p", properties: [("n", "\(size)")], body: body, compressed: compressed))
            var got: [BLIPMessage] = []
            for _ in 0..<10_000 where got.isEmpty {
                got += try Self.pump(a, b)
                _ = try Self.pump(b, a)
            }
            let m = try #require(got.first, "\(size)")
            #expect(got.count == 1 && m.body == body, "\(size)")
            #expect(m.properties["n"] == "\(size)")
            #expect(m.body.capacity - m.body.count <= 4 * m.body.count, "\(size): capacity \(m.body.capacity)")
        }
    }

    @Test func urgentOvertakesABigTransfer() throws {
        let a = BLIPSession(), b = BLIPSession()
        a.send(request: .request(profile: "bulk", body: noiseBody(2_000_000)))
        _ = try a.nextFrame().map { try b.receive($0) }      // the big one has started
        a.send(request: .request(profile: "ping", urgent: true))
        var order: [String] = []
        for _ in 0..<1000 where order.count < 2 {
            guard let f = try a.nextFrame() else { _ = try Self.pump(b, a); continue }
            if let m = try b.receive(f) { order.append(m.profile ?? "") }
            _ = try Self.pump(b, a)
        }
        #expect(order == ["ping", "bulk"])
    }

    @Test func senderFreezesAtTheWindowUntilAcked() throws {
        let a = BLIPSession(), b = BLIPSession()
        a.send(request: .request(profile: "bulk", body: noiseBody(1_000_000)))
        var sent = 0
        var frames: [[UInt8]] = []
        while let f = try a.nextFrame() { frames.append(f); sent += f.count }
        // Frozen: at most 128,000 unacknowledged bytes (plus one frame) left the sender.
        #expect(sent < 128_000 + 16_384 && sent >= 128_000 - 16_384)
        #expect(try a.nextFrame() == nil)
        for f in frames { _ = try b.receive(f) }
        let acks = try b.drain()
        #expect(!acks.isEmpty)
        for ack in acks { _ = try a.receive(ack) }
        #expect(try a.nextFrame() != nil, "an ACK thaws the message")
    }

    @Test func noReplyRequestsGetNoResponse() throws {
        let a = BLIPSession(), b = BLIPSession()
        a.send(request: .request(profile: "note", noReply: true))
        let m = try #require(try Self.pump(a, b).first)
        #expect(m.isNoReply)
        #expect(throws: BLIPError.self) { try b.send(response: BLIPMessage(type: .response), to: m.number) }
    }

    static func frame(number: UInt64, flags: UInt8, stream: [UInt8], crcOver: [UInt8]? = nil) -> [UInt8] {
        var f = Varint.encode(number)
        f.append(flags)
        f += stream
        var c = BLIPChecksum()
        (crcOver ?? stream).withUnsafeBytes { c.update($0) }
        let v = c.value
        return f + [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)]
    }

    static let fatalCases: [(String, [UInt8])] = [
        ("truncated varint", [0x81]),
        ("missing flags", [0x01]),
        ("bad CRC", frame(number: 1, flags: 0, stream: [0x00], crcOver: [0x01])),
        ("bad deflate", frame(number: 1, flags: 0x08, stream: [0xff, 0xff, 0xff], crcOver: [])),
        // Found by FuzzBLIP: a final deflate block used to make the inflate loop spin forever.
        ("deflate final block", frame(number: 1, flags: 0x08, stream: [0x01, 0x00, 0x00, 0xff, 0xff], crcOver: [])),
        ("out of sequence", frame(number: 2, flags: 0, stream: [0x00])),
        ("properties not NUL-terminated", frame(number: 1, flags: 0, stream: [0x03] + Array("a\0b".utf8))),
        ("properties over 100 KiB", frame(number: 1, flags: 0, stream: Varint.encode(200_000) + [0x61])),
        ("response to an unsent request", frame(number: 9, flags: 1, stream: [0x00])),
    ]

    @Test(.timeLimit(.minutes(5)), arguments: fatalCases)
    func fatalErrors(name: String, frame: [UInt8]) {
        let s = BLIPSession()
        #expect(throws: BLIPError.self, "\(name)") { _ = try s.receive(frame) }
    }

    @Test func undefinedTypesAreIgnored() throws {
        let s = BLIPSession()
        #expect(try s.receive([0x01, 0x03, 0x00, 0, 0, 0, 0]) == nil)
        #expect(try s.receive(try vec("ref-2.7-getCheckpoint")) != nil, "CRC untouched by the ignored frame")
    }
}

/// An independent decoder (Python, zlib + binascii, written from Protocol/blip.md) reads what
/// Ferry writes, and Ferry reads what it writes.
@Suite(.enabled(if: blipPython != nil, "needs python3"))
struct BLIPIndependentDecoderTests {
    static func crc(_ b: [UInt8]) -> UInt32 { var c = BLIPChecksum(); b.withUnsafeBytes { c.update($0) }; return c.value }

    @Test func pythonDecodesFerryFrames() throws {
        let peer = BLIPSession(), s = BLIPSession()
        peer.send(request: .request(profile: "ask"))
        for f in try peer.drain() { _ = try s.receive(f) }
        let big = jsonLikeBody(60_000), noise = noiseBody(40_000)
        s.send(request: .request(profile: "a", properties: [("k", "v")], body: Array("small".utf8)))
        s.send(request: .request(profile: "b", body: big, compressed: true))
        s.send(request: .request(profile: "c", body: noise, urgent: true))
        try s.sendError(to: 1, domain: "HTTP", code: 404, message: "missing")
        let frames = try s.drain()
        #expect(frames.count > 6, "multi-frame messages")
        let (status, lines) = try runBLIPPython([], input: frames.map(hexString))
        #expect(status == 0, "\(lines)")
        let decoded = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        func find(_ type: Int, _ number: Int) -> [String: Any]? {
            decoded.first { ($0["type"] as? Int) == type && ($0["number"] as? Int) == number }
        }
        let b = try #require(find(0, 2))
        #expect(b["body_len"] as? Int == big.count && (b["body_crc"] as? NSNumber)?.uint32Value == Self.crc(big))
        #expect(b["compressed"] as? Bool == true)
        let c = try #require(find(0, 3))
        #expect(c["urgent"] as? Bool == true && (c["body_crc"] as? NSNumber)?.uint32Value == Self.crc(noise))
        let a = try #require(find(0, 1))
        #expect((a["properties"] as? [[String]]) == [["Profile", "a"], ["k", "v"]])
        let e = try #require(find(2, 1))
        #expect((e["properties"] as? [[String]]) == [["Error-Domain", "HTTP"], ["Error-Code", "404"]])
    }

    @Test func ferryDecodesPythonFrames() throws {
        let body = String(repeating: "{\"x\":1},", count: 3000)
        let specs = [
            #"{"number": 1, "properties": [["Profile", "one"]], "body": "hi", "frame": 3}"#,
            "{\"number\": 2, \"properties\": [[\"Profile\", \"two\"]], \"body\": \"\(body.replacingOccurrences(of: "\"", with: "\\\""))\", \"compress\": true, \"frame\": 5000}",
            #"{"number": 3, "properties": [["Profile", "three"], ["a", "b"]], "body": "", "compress": true}"#,
        ]
        let (status, lines) = try runBLIPPython(["--encode"], input: specs)
        #expect(status == 0, "\(lines)")
        let s = BLIPSession()
        let msgs = try lines.compactMap { try s.receive(hexBytes($0)) }
        #expect(msgs.map(\.profile) == ["one", "two", "three"])
        #expect(msgs.count == 3 && msgs[1].body == Array(body.utf8) && msgs[0].body == Array("hi".utf8))
        #expect(msgs.last?.properties["a"] == "b")
    }
}
