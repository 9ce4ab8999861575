@testable import FerryBLIP
import FerryNet
import FerryWebSocket
import Foundation
import Synchronization
import Testing

/// Streamed bodies over real sockets: an in-process server and client on loopback.
@Suite(.serialized) struct BLIPStreamingConnectionTests {
    /// A one-shot signal a test task can wait on without blocking a thread.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        func open() {
            let waiters = state.withLock { s in s.open = true; defer { s.waiters = [] }; return s.waiters }
            for w in waiters { w.resume() }
        }
        func wait() async {
            await withCheckedContinuation { c in
                let open = state.withLock { s in if !s.open { s.waiters.append(c) }; return s.open }
                if open { c.resume() }
            }
        }
    }

    /// Profiles: `count` (streamed body → its size and a checksum), `echo` (streams the body
    /// back as it arrives), `generate` (a whole request answered with `n` streamed bytes),
    /// `held` (reads nothing until `gate` opens), `ping`, `cut` (streams 1 MiB, then closes).
    static func server(group: EventLoopGroup, gate: Gate = Gate(), window: Int = 256 * 1024) async throws -> WebSocketListener {
        var config = BLIPConfiguration()
        config.streamWindow = window
        return try await BLIPConnection.listen(port: 0, path: "/s", app: "FerryTest", configuration: config, group: group) { conn in
            conn.register(profile: "count", streaming: { req, body in
                Task {
                    var n = 0, sum: UInt64 = 0
                    do {
                        for try await chunk in body { n += chunk.count; sum = checksum(chunk, sum) }
                        req.respond(properties: [("bytes", String(n)), ("sum", String(sum))])
                    } catch {
                        req.respondError(code: 500, message: "\(error)")
                    }
                }
            })
            conn.register(profile: "echo", streaming: { req, body in
                let out = req.respondStreaming(properties: [("echo", "1")], compressed: req.message.isCompressed)
                Task {
                    do {
                        for try await chunk in body { try await out.write(chunk) }
                        try await out.finish()
                    } catch {
                        out.abort(reason: "\(error)")
                    }
                }
            })
            conn.register(profile: "generate") { req in
                let n = Int(req.message.properties["n"] ?? "") ?? 0
                let out = req.respondStreaming(properties: [("n", String(n))], compressed: req.message.isCompressed)
                Task {
                    var sent = 0
                    while sent < n {
                        let piece = pattern(min(100_000, n - sent), at: sent)
                        try await out.write(piece)
                        sent += piece.count
                    }
                    try await out.finish()
                }
            }
            conn.register(profile: "held", streaming: { req, body in
                Task {
                    await gate.wait()
                    var n = 0
                    for try await chunk in body { n += chunk.count }
                    req.respond(properties: [("bytes", String(n))])
                }
            })
            conn.register(profile: "ping") { $0.respond(properties: [("pong", "1")]) }
            conn.register(profile: "cut") { req in
                let out = req.respondStreaming()
                Task {
                    try await out.write(pattern(1 << 20, at: 0))
                    await req.connection.close()
                }
            }
        }
    }

    static func connect(_ server: WebSocketListener, group: EventLoopGroup) async throws -> BLIPConnection {
        try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/s", app: "FerryTest", group: group)
    }

    /// Deterministic bytes for stream position `at`: compressible, but not trivially.
    static func pattern(_ n: Int, at: Int) -> [UInt8] {
        (0..<n).map { i in let p = at + i; return UInt8(truncatingIfNeeded: (p / 7) ^ (p % 251)) }
    }

    /// A position-sensitive checksum (FNV-1a), continued across chunks.
    static func checksum(_ bytes: [UInt8], _ seed: UInt64 = 0) -> UInt64 {
        var h = seed == 0 ? 0xcbf2_9ce4_8422_2325 : seed
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    @Test(arguments: [false, true])
    func streamedRequestBodyArrivesWholeAndInOrder(compressed: Bool) async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.server(group: group)
        let client = try await Self.connect(server, group: group)
        let total = 3 << 20
        let upload = client.startRequest(.request(profile: "count", body: Self.pattern(1000, at: 0), compressed: compressed))
        var sum = Self.checksum(Self.pattern(1000, at: 0))
        var sent = 1000
        while sent < total {
            let piece = Self.pattern(min(77_777, total - sent), at: sent)
            sum = Self.checksum(piece, sum)
            try await upload.body.write(piece)
            sent += piece.count
        }
        try await upload.body.finish()
        let reply = try await upload.response()
        #expect(reply.properties["bytes"] == String(total) && reply.properties["sum"] == String(sum))
        // One-frame requests reach the streaming handler too, as a one-chunk body.
        let small = try await client.send(.request(profile: "count", body: [1, 2, 3]))
        #expect(small.properties["bytes"] == "3" && small.properties["sum"] == String(Self.checksum([1, 2, 3])))
        await client.close()
        await server.close()
    }

    @Test(arguments: [false, true])
    func fullDuplexStreamingEcho(compressed: Bool) async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.server(group: group)
        let client = try await Self.connect(server, group: group)
        let total = 8 << 20
        let upload = client.startRequest(.request(profile: "echo", compressed: compressed))
        // The reply streams back while the request is still being written: read it alongside.
        async let echoed: (Int, UInt64, String?) = {
            let stream = try await upload.responseStream()
            var n = 0, sum: UInt64 = 0
            for try await chunk in stream.body { n += chunk.count; sum = Self.checksum(chunk, sum) }
            return (n, sum, stream.properties["echo"])
        }()
        var sum: UInt64 = 0
        var sent = 0
        while sent < total {
            let piece = Self.pattern(min(65_536, total - sent), at: sent)
            sum = Self.checksum(piece, sum)
            try await upload.body.write(piece)
            sent += piece.count
        }
        try await upload.body.finish()
        let (n, got, marker) = try await echoed
        #expect(n == total && got == sum && marker == "1")
        await client.close()
        await server.close()
    }

    @Test func streamedResponseToAWholeRequestHasItsPropertiesFirst() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.server(group: group)
        let client = try await Self.connect(server, group: group)
        let n = 5_000_000
        let stream = try await client.streamResponse(to: .request(profile: "generate", properties: [("n", String(n))], compressed: true))
        #expect(stream.properties["n"] == String(n) && stream.head.type == .response)
        var at = 0
        var same = true
        for try await chunk in stream.body {
            same = same && chunk == Self.pattern(chunk.count, at: at)
            at += chunk.count
        }
        #expect(at == n && same)
        // Short responses (one frame) come as one-chunk streams; ERR replies throw.
        let short = try await client.streamResponse(to: .request(profile: "ping"))
        let shortBody = try await short.body.collect(upTo: 100)
        #expect(short.properties["pong"] == "1" && shortBody.isEmpty)
        await #expect(throws: BLIPError.errorResponse(domain: "BLIP", code: 404, message: "no handler for message")) {
            _ = try await client.streamResponse(to: .request(profile: "nobody"))
        }
        await client.close()
        await server.close()
    }

    @Test func aReaderThatFallsBehindHoldsOnlyItsOwnSender() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let gate = Gate()
        let server = try await Self.server(group: group, gate: gate)
        let client = try await Self.connect(server, group: group)
        let total = 32 << 20
        let written = Atomic<Int>(0)
        let upload = client.startRequest(.request(profile: "held"))
        let writer = Task {
            var sent = 0
            let piece = [UInt8](repeating: 7, count: 64 * 1024)
            while sent < total {
                try await upload.body.write(piece)
                sent += piece.count
                written.store(sent, ordering: .relaxed)
            }
            try await upload.body.finish()
        }
        // The server reads nothing: the upload freezes at BLIP's window once the server's
        // stream buffer is full, and the writer stops soon after.
        var frozen = false
        for _ in 0..<1_000_000 where !frozen {
            frozen = await client.flowState().frozen
            await Task.yield()
        }
        #expect(frozen)
        // Other requests still flow while that message is held.
        let pong = try await client.send(.request(profile: "ping"))
        #expect(pong.properties["pong"] == "1")
        let stalledAt = written.load(ordering: .relaxed)
        #expect(stalledAt < 4 << 20, "the writer ran \(stalledAt) bytes ahead of a reader that reads nothing")
        gate.open()
        try await writer.value
        let reply = try await upload.response()
        #expect(reply.properties["bytes"] == String(total))
        await client.close()
        await server.close()
    }

    @Test func aClosedConnectionEndsStreamsWithATypedError() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.server(group: group)
        let client = try await Self.connect(server, group: group)
        let stream = try await client.streamResponse(to: .request(profile: "cut"))
        var received = 0
        do {
            for try await chunk in stream.body { received += chunk.count }
            Issue.record("the body ended normally after \(received) bytes")
        } catch {
            guard case .disconnected = error else { Issue.record("unexpected \(error)"); return }
        }
        #expect(received <= 1 << 20)
        let late = client.startRequest(.request(profile: "count"))
        await #expect(throws: BLIPError.self) { try await late.body.write([1]) }
        await server.close()
    }

    @Test func anAbortedBodyClosesTheConnectionRatherThanEndingTheMessage() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.server(group: group)
        let client = try await Self.connect(server, group: group)
        let upload = client.startRequest(.request(profile: "count"))
        try await upload.body.write(Self.pattern(100_000, at: 0))
        upload.body.abort(reason: "disk read failed")
        await #expect(throws: BLIPError.aborted("#1: disk read failed")) { _ = try await upload.response() }
        #expect(await client.closed() == .aborted("#1: disk read failed"))
        // A body source that throws does the same through send(_:body:).
        let client2 = try await Self.connect(server, group: group)
        struct SourceFailed: Error {}
        let source = AsyncThrowingStream<[UInt8], Error> { c in
            c.yield([1, 2, 3])
            c.finish(throwing: SourceFailed())
        }
        await #expect(throws: BLIPError.self) { _ = try await client2.send(.request(profile: "count"), body: source) }
        #expect(await client2.closed() != nil)
        await server.close()
    }
}
