@_spi(Fuzzing) @testable import FerryBLIP
import FerryTestSupport
import Foundation
import Testing

/// Streamed bodies at the session level: framing as bytes arrive, MoreComing until the end,
/// scheduling beside other messages, flow control and ACK withholding on the receiving side.
@Suite struct BLIPStreamingSessionTests {
    /// A receiving session that streams multi-frame messages' bodies (all, or only those of
    /// the given profiles); the opened bodies are kept by number.
    final class Receiver {
        let session: BLIPSession
        var heads: [UInt64: BLIPMessage] = [:]
        var bodies: [UInt64: IncomingBody] = [:]
        var taken: [UInt64: [UInt8]] = [:]
        var whole: [BLIPMessage] = []

        init(window: Int = 256 * 1024, profiles: Set<String>? = nil) {
            var config = BLIPConfiguration()
            config.streamWindow = window
            session = BLIPSession(configuration: config)
            session.openStream = { [unowned self] head in
                if let profiles, !profiles.contains(head.profile ?? "") { return nil }
                let body = IncomingBody(type: head.type, number: head.number, window: window)
                heads[head.number] = head
                bodies[head.number] = body
                return body
            }
        }

        func receive(_ frame: [UInt8]) throws {
            if let m = try session.receive(frame) { whole.append(m) }
        }

        /// Takes everything buffered of message `n`, as a reader would.
        func drainBody(_ n: UInt64) {
            guard let body = bodies[n] else { return }
            while let c = body.take() {
                #expect(c.count <= IncomingBody.chunkSize)
                taken[n, default: []] += c
            }
            session.sendWithheldAck(for: body)
        }
    }

    /// The flags byte of a frame whose message number is below 128.
    static func flags(_ frame: [UInt8]) -> BLIPFlags { BLIPFlags(rawValue: frame[1]) }

    /// Moves frames a → r and ACKs back until neither side has anything to send.
    static func exchange(_ a: BLIPSession, _ r: Receiver, readBodies: Bool = true) throws -> [[UInt8]] {
        var all: [[UInt8]] = []
        while true {
            let frames = try a.drain()
            for f in frames { try r.receive(f) }
            if readBodies { for n in r.bodies.keys { r.drainBody(n) } }
            let acks = try r.session.drain()
            for f in acks { _ = try a.receive(f) }
            all += frames
            if frames.isEmpty && acks.isEmpty { return all }
        }
    }

    @Test(arguments: [false, true])
    func streamedRequestIsFramedAsBytesArriveAndEndsOnlyAtFinish(compressed: Bool) throws {
        let a = BLIPSession(), r = Receiver()
        let body = jsonLikeBody(300_000)
        let m = a.sendStreamed(request: .request(profile: "upload", properties: [("k", "v")], compressed: compressed))
        var frames = try Self.exchange(a, r)
        #expect(frames.count == 1, "only the properties can go before any body byte is written")
        #expect(r.heads[1]?.properties["k"] == "v" && r.heads[1]?.isCompressed == compressed)
        for start in stride(from: 0, to: body.count, by: 70_000) {
            a.append(Array(body[start..<min(start + 70_000, body.count)]), to: m)
            frames += try Self.exchange(a, r)
            #expect(try a.nextFrame() == nil, "a streamed message with nothing to frame is skipped")
        }
        #expect(frames.allSatisfy { Self.flags($0).contains(.moreComing) }, "no frame ends the message before finish")
        #expect(frames.allSatisfy { $0.count <= BLIPConstants.maxFrameSize })
        #expect(r.bodies[1]?.finished == false)
        a.finish(m)
        let last = try Self.exchange(a, r)
        #expect(last.count == 1 && !Self.flags(last[0]).contains(.moreComing))
        #expect(last[0].count > 2 + 4 || compressed, "the held-back byte makes the final frame carry data")
        #expect(r.bodies[1]?.finished == true && r.taken[1] == body)
        #expect(r.whole.isEmpty)
        // The response is owed from the moment the stream opened.
        try r.session.send(response: BLIPMessage(type: .response, body: Array("ok".utf8)), to: 1)
        let reply = try r.session.drain().compactMap { try a.receive($0) }
        #expect(reply.first?.body == Array("ok".utf8))
    }

    @Test(arguments: [false, true])
    func anEmptyStreamedBodyEndsWithAnEmptyUncompressedFrame(compressed: Bool) throws {
        // The properties go at once; with no body byte to hold back, the last frame is empty,
        // and it cannot be deflated, so it goes without the Compressed flag.
        let client = BLIPSession(), r = Receiver()
        client.send(request: .request(profile: "q"))
        for f in try client.drain() { try r.receive(f) }
        let m = try r.session.sendStreamed(response: BLIPMessage(type: .response, flags: compressed ? .compressed : [],
                                                                 properties: [("a", "b")]), to: 1)
        let first = try r.session.drain()
        #expect(first.count == 1 && Self.flags(first[0]).contains(.moreComing))
        #expect(Self.flags(first[0]).contains(.compressed) == compressed)
        r.session.finish(m)
        let rest = try r.session.drain()
        #expect(rest.count == 1 && !Self.flags(rest[0]).contains(.moreComing) && rest.first?.count == 2 + 4)
        #expect(rest.first.map { Self.flags($0).contains(.compressed) } == false)
        let got = try (first + rest).compactMap { try client.receive($0) }
        #expect(got.count == 1 && got.first?.body.isEmpty == true && got.first?.properties["a"] == "b")
    }

    @Test func streamedBodyInterleavesWithOtherMessagesAndUrgentOnesOvertakeIt() throws {
        let a = BLIPSession(), r = Receiver(profiles: ["stream"])
        let m = a.sendStreamed(request: .request(profile: "stream"))
        a.append(noiseBody(200_000), to: m)
        _ = try a.nextFrame().map { try r.receive($0) }      // the stream has started
        a.send(request: .request(profile: "normal", body: noiseBody(60_000, seed: 2)))
        a.send(request: .request(profile: "ping", urgent: true))
        var order: [String] = []
        var streamFramesBeforeNormal = 0
        for _ in 0..<1000 {
            guard let f = try a.nextFrame() else {
                for n in r.bodies.keys { r.drainBody(n) }
                let acks = try r.session.drain()
                if acks.isEmpty { break }
                for ack in acks { _ = try a.receive(ack) }
                continue
            }
            let number = f[0]
            if number == 1 && !order.contains("normal") { streamFramesBeforeNormal += 1 }
            try r.receive(f)
            for m in r.whole where !order.contains(m.profile ?? "") { order.append(m.profile ?? "") }
            for ack in try r.session.drain() { _ = try a.receive(ack) }
        }
        #expect(order == ["ping", "normal"], "the urgent request overtakes; the normal one completes while the stream is open")
        #expect(streamFramesBeforeNormal > 1, "round robin: the stream kept sending beside the normal request")
        #expect(r.bodies[1]?.finished == false)
        a.finish(m)
        _ = try Self.exchange(a, r)
        #expect(r.taken[1] == noiseBody(200_000))
    }

    @Test func flowControlFreezesAStreamedMessageAndAcksThawIt() throws {
        let a = BLIPSession(), r = Receiver()
        let m = a.sendStreamed(request: .request(profile: "bulk"))
        a.append(noiseBody(1_000_000), to: m)
        var sent = 0
        while let f = try a.nextFrame() { sent += f.count; try r.receive(f) }
        #expect(a.hasFrozenMessage && a.unacknowledgedBytes >= BLIPConstants.maxUnackedBytes)
        #expect(sent < 160_000)
        a.finish(m)
        _ = try Self.exchange(a, r)
        #expect(r.taken[1] == noiseBody(1_000_000) && !a.hasFrozenMessage)
    }

    @Test(arguments: [false, true])
    func receiverWithholdsAcksWhileItsReaderIsBehind(compressed: Bool) throws {
        let window = 64 * 1024
        let a = BLIPSession(), r = Receiver(window: window, profiles: ["bulk"])
        let body = compressed ? jsonLikeBody(3_000_000) : noiseBody(3_000_000)
        let m = a.sendStreamed(request: .request(profile: "bulk", compressed: compressed))
        a.append(body, to: m)
        a.finish(m)
        // Nobody reads: the sender stops once the window and 128,000 unacknowledged bytes fill.
        _ = try Self.exchange(a, r, readBodies: false)
        let buffered = try #require(r.bodies[1]).bufferedBytes
        #expect(a.hasFrozenMessage)
        #expect(buffered < 3_000_000)
        if !compressed { #expect(buffered <= window + 2 * BLIPConstants.maxUnackedBytes) }
        // Another message still gets through while this one is held.
        a.send(request: .request(profile: "other", body: noiseBody(40_000, seed: 3)))
        _ = try Self.exchange(a, r, readBodies: false)
        #expect(r.whole.map(\.profile) == ["other"])
        // The reader catches up: withheld ACKs go out and the rest arrives.
        var peak = buffered
        for _ in 0..<10_000 where r.bodies[1]?.finished == false || (r.bodies[1]?.bufferedBytes ?? 0) > 0 {
            r.drainBody(1)
            _ = try Self.exchange(a, r, readBodies: false)
            peak = max(peak, r.bodies[1]?.bufferedBytes ?? 0)
        }
        r.drainBody(1)
        #expect(r.taken[1] == body)
        if !compressed { #expect(peak <= window + 2 * BLIPConstants.maxUnackedBytes) }
    }

    @Test func streamedResponseOfAStreamedRequestRoundTrips() throws {
        let client = Receiver(), server = Receiver()
        let req = client.session.sendStreamed(request: .request(profile: "echo", compressed: true))
        let body = jsonLikeBody(500_000)
        client.session.append(Array(body[..<250_000]), to: req)
        for f in try client.session.drain() { try server.receive(f) }
        // The server answers while the request is still arriving.
        let reply = try server.session.sendStreamed(response: BLIPMessage(type: .response, flags: .compressed, properties: [("r", "1")]), to: 1)
        server.session.append(Array(body[..<250_000]), to: reply)
        client.session.append(Array(body[250_000...]), to: req)
        client.session.finish(req)
        server.session.append(Array(body[250_000...]), to: reply)
        server.session.finish(reply)
        for _ in 0..<1000 {
            let up = try client.session.drain(), down = try server.session.drain()
            if up.isEmpty && down.isEmpty { break }
            for f in up { try server.receive(f) }
            for f in down { try client.receive(f) }
            for n in server.bodies.keys { server.drainBody(n) }
            for n in client.bodies.keys { client.drainBody(n) }
        }
        #expect(server.taken[1] == body && client.taken[1] == body)
        #expect(client.heads[1]?.properties["r"] == "1" && client.heads[1]?.type == .response)
    }
}
