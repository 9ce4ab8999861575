@testable import FerryBLIP
import FerryNet
import FerryWebSocket
import Foundation
import Synchronization
import Testing

/// BLIP over real sockets: an in-process echo server and clients on loopback.
@Suite(.serialized) struct BLIPConnectionTests {
    /// Echoes every request's properties and body, compressed when the request was.
    static func echoServer(group: EventLoopGroup) async throws -> WebSocketListener {
        try await BLIPConnection.listen(port: 0, path: "/blip", app: "FerryTest", group: group) { conn in
            conn.registerDefault { req in
                guard !req.message.isNoReply else { return }
                if req.message.profile == "fail" { req.respondError(domain: "Test", code: 418, message: "as asked"); return }
                req.respond(properties: req.message.properties, body: req.message.body, compressed: req.message.isCompressed)
            }
        }
    }

    @Test func mixedRequestsAllAnswered() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.echoServer(group: group)
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "FerryTest", group: group)
        #expect(client.subprotocol == "BLIP_3+FerryTest")
        let sizes = [0, 1, 100, 16_000, 16_384, 65_536, 200_000, 1 << 20]
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for (i, size) in sizes.enumerated() {
                for variant in 0..<4 {
                    tasks.addTask {
                        let body = variant % 2 == 0 ? jsonLikeBody(size) : noiseBody(size, seed: UInt32(i))
                        let req = BLIPMessage.request(profile: "echo", properties: [("i", "\(i)-\(variant)")], body: body,
                                                      urgent: variant == 3, compressed: variant >= 2)
                        let reply = try await client.send(req)
                        #expect(reply.body == body, "size \(size) variant \(variant)")
                        #expect(reply.properties["i"] == "\(i)-\(variant)")
                        #expect(reply.isUrgent == (variant == 3))
                    }
                }
            }
            for n in 0..<20 { tasks.addTask { _ = try await client.send(.request(profile: "note", body: [UInt8(n)], noReply: true)) } }
            try await tasks.waitForAll()
        }
        await client.close()
        await server.close()
    }

    /// `BLIPIncomingRequest.respond(_:)` answers requests held back off the loop in one batch:
    /// every one gets its own reply (a response or an error), in the order given, including
    /// requests whose replies are not in arrival order.
    @Test func heldRequestsAnsweredInOneBatch() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let n = 40
        let held = Mutex<[BLIPIncomingRequest]>([])
        let server = try await BLIPConnection.listen(port: 0, path: "/blip", app: "FerryTest", group: group) { conn in
            conn.registerDefault { req in
                let all = held.withLock { h -> [BLIPIncomingRequest]? in
                    h.append(req)
                    return h.count == n ? h : nil
                }
                guard let all else { return }
                // Off the loop, newest first; every third one refused.
                Task.detached {
                    BLIPIncomingRequest.respond(all.reversed().map { r in
                        let i = Int(r.message.properties["i"] ?? "") ?? -1
                        return (r, i % 3 == 0 ? .errorResponse(domain: "Test", code: 409, message: "no \(i)")
                                              : .response(properties: [("i", "\(i)")], body: r.message.body))
                    })
                }
            }
        }
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "FerryTest", group: group)
        let results = await client.sendAll((0..<n).map { i in
            .request(profile: "hold", properties: [("i", "\(i)")], body: Array("body \(i)".utf8))
        })
        #expect(results.count == n)
        for (i, result) in results.enumerated() {
            switch result {
            case .success(let reply):
                #expect(i % 3 != 0)
                #expect(reply.properties["i"] == "\(i)")
                #expect(reply.body == Array("body \(i)".utf8))
            case .failure(let error):
                #expect(i % 3 == 0, "\(i): \(error)")
                guard case .errorResponse(let domain, let code, let message) = error else {
                    Issue.record("\(i): \(error)"); continue
                }
                #expect(domain == "Test" && code == 409 && message == "no \(i)")
            }
        }
        await client.close()
        await server.close()
    }

    @Test func urgentRequestOvertakesA16MiBTransfer() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await Self.echoServer(group: group)
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "FerryTest", group: group)
        let order = Mutex<[String]>([])
        let big = noiseBody(16 << 20)
        async let bigReply: BLIPMessage = client.send(.request(profile: "big", body: big))
        // Queued after the big one started: it must be answered first.
        let small = try await client.send(.request(profile: "small", urgent: true))
        order.withLock { $0.append("small") }
        let b = try await bigReply
        order.withLock { $0.append("big") }
        #expect(small.isUrgent)
        #expect(b.body.count == big.count)
        #expect(order.withLock { $0 } == ["small", "big"])
        await client.close()
        await server.close()
    }

    /// Handlers usually capture their owner, which holds the connection: a closed connection
    /// drops them (no cycle outlives it), and a handler registered after the close is not kept.
    @Test func aClosedConnectionReleasesItsHandlers() async throws {
        final class Owner: Sendable {}
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let server = try await Self.echoServer(group: group)
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "FerryTest", group: group)
        weak var weakOwner: Owner?
        do {
            let owner = Owner()
            weakOwner = owner
            client.register(profile: "a") { _ in _ = owner }
            client.registerDefault { _ in _ = owner }
            client.register(profile: "s", streaming: { _, _ in _ = owner })
        }
        _ = try await client.send(.request(profile: "echo"))   // the registrations ran on the loop
        #expect(weakOwner != nil)
        await client.close()
        #expect(weakOwner == nil)
        client.register(profile: "late") { _ in }
        await withCheckedContinuation { c in client.loop.execute { c.resume() } }
        #expect(client.handlers.isEmpty)
        await server.close()
    }

    @Test func unknownProfileGets404AndErrorsAreTyped() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let server = try await BLIPConnection.listen(port: 0, app: "FerryTest", group: group) { conn in
            conn.register(profile: "fail") { $0.respondError(domain: "Test", code: 418, message: "as asked") }
        }
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/", app: "FerryTest", group: group)
        await #expect(throws: BLIPError.errorResponse(domain: "BLIP", code: 404, message: "no handler for message")) {
            _ = try await client.send(.request(profile: "nobody"))
        }
        await #expect(throws: BLIPError.errorResponse(domain: "Test", code: 418, message: "as asked")) {
            _ = try await client.send(.request(profile: "fail"))
        }
        await client.close()
        await server.close()
    }

    @Test func wrongAppIsRefusedAtTheUpgrade() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let server = try await Self.echoServer(group: group)
        await #expect(throws: BLIPError.self) {
            _ = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "Other", group: group)
        }
        await server.close()
    }

    /// Each fatal case of the error matrix, sent by a raw WebSocket peer: the server closes that
    /// connection with 1011, fails the request it had pending on it with a protocol error, and a
    /// second connection to the same server keeps working.
    @Test(arguments: BLIPSessionTests.fatalCases.filter { $0.0 != "response to an unsent request" })
    func fatalProtocolErrorClosesWith1011Only(name: String, frame: [UInt8]) async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let (failures, failed) = AsyncStream<BLIPError>.makeStream()
        let server = try await BLIPConnection.listen(port: 0, path: "/blip", app: "FerryTest", group: group) { conn in
            conn.registerDefault { req in req.respond(body: req.message.body) }
            // A request of the server's own that the raw peer never answers.
            conn.send(.request(profile: "hello")) { result in
                // The healthy client answers it (404); only the raw peer's connection fails it.
                if case .failure(let e) = result, case .errorResponse = e {} else if case .failure(let e) = result { failed.yield(e) }
            }
        }
        let healthy = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/blip", app: "FerryTest", group: group)
        var config = BLIPConnection.webSocketConfiguration(app: "FerryTest")
        config.subprotocols = ["BLIP_3+FerryTest"]
        let raw = try await WebSocket.connect(to: "ws://127.0.0.1:\(server.port)/blip", configuration: config, group: group)
        try await raw.send(binary: frame)
        do { for try await _ in raw.messages {} } catch {}
        let info = await raw.closed()
        #expect(info.code == .internalError, "\(name)")
        var it = failures.makeAsyncIterator()
        let failure = await it.next()
        if case .protocolError? = failure {} else { Issue.record("\(name): pending request ended with \(String(describing: failure))") }
        let reply = try await healthy.send(.request(profile: "echo", body: [1, 2, 3]))
        #expect(reply.body == [1, 2, 3])
        await healthy.close()
        await server.close()
    }

    /// A NoReply request completes once it is queued or sent; a completion that sends the next
    /// request must not get it onto the wire first (the peer requires numbers in order).
    @Test func aNoReplyCompletionThatSendsAgainKeepsTheOrder() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let seen = Mutex<[String]>([])
        let server = try await BLIPConnection.listen(port: 0, app: "FerryTest", group: group) { conn in
            conn.registerDefault { req in
                seen.withLock { $0.append(req.message.profile ?? "") }
                if !req.message.isNoReply { req.respond(body: [42]) }
            }
        }
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/", app: "FerryTest", group: group)
        let reply: Result<BLIPMessage, BLIPError> = await withCheckedContinuation { c in
            client.send(.request(profile: "first", noReply: true)) { _ in
                client.send(.request(profile: "second")) { c.resume(returning: $0) }
            }
        }
        #expect(try reply.get().body == [42])
        #expect(seen.withLock { $0 } == ["first", "second"])
        await client.close()
        await server.close()
    }

    @Test func pendingRequestsFailWhenTheServerGoesAway() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let server = try await BLIPConnection.listen(port: 0, app: "FerryTest", group: group) { conn in
            conn.register(profile: "hang") { req in
                // Never answer; drop the connection instead.
                Task { await req.connection.close() }
            }
        }
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/", app: "FerryTest", group: group)
        await #expect(throws: BLIPError.self) { _ = try await client.send(.request(profile: "hang")) }
        await server.close()
    }

    /// A receiver that stops reading freezes the sender at BLIP's window: no more than 128,000
    /// unacknowledged bytes (plus one frame) leave it, however big the message, nothing piles
    /// up in its socket queue and its memory does not grow while frozen; when the receiver
    /// reads again the transfer completes intact.
    @Test(.timeLimit(.minutes(5)))
    func stalledReceiverFreezesTheSender() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let serverConn = Mutex<BLIPConnection?>(nil)
        let server = try await BLIPConnection.listen(port: 0, app: "FerryTest", group: group) { conn in
            conn.pauseReading()
            serverConn.withLock { $0 = conn }
            conn.registerDefault { req in
                var crc = BLIPChecksum()
                req.message.body.withUnsafeBytes { crc.update($0) }
                req.respond(body: Array("\(req.message.body.count) \(crc.value)".utf8))
            }
        }
        let client = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(server.port)/", app: "FerryTest", group: group)
        let body = noiseBody(32 << 20)
        var expected = BLIPChecksum()
        body.withUnsafeBytes { expected.update($0) }
        async let reply = client.send(.request(profile: "bulk", body: body))
        // Wait (loop round trips, no sleeping) until the sender has frozen.
        var state = await client.flowState()
        while !state.frozen { await Task.yield(); state = await client.flowState() }
        let window = BLIPConstants.maxUnackedBytes + BLIPConstants.maxFrameSize
        #expect(state.bytesSent <= window)
        #expect(state.unacknowledgedBytes <= window && state.unacknowledgedBytes > BLIPConstants.maxUnackedBytes - BLIPConstants.maxFrameSize)
        // What the sender has not handed to the kernel stays below one window too.
        #expect(state.bufferedBytes <= window)
        // Many loop turns later nothing more has left or been queued: a sender that kept framing
        // the 32 MiB body into its write queue would show it in `bufferedBytes`. (Not process RSS:
        // swift-testing runs other suites in this process at the same time, so RSS is theirs too.)
        // What was already framed may still drain into the kernel (a loaded machine runs the
        // loop late), so `bufferedBytes` may shrink but never grow.
        for _ in 0..<200 {
            let again = await client.flowState()
            let stays = again.frozen && again.bytesSent == state.bytesSent
                && again.unacknowledgedBytes == state.unacknowledgedBytes
                && again.bufferedBytes <= state.bufferedBytes
            #expect(stays, "a frozen sender stays put: \(again) after \(state)")
            if !stays { break }
        }
        serverConn.withLock { $0 }?.resumeReading()
        let r = try await reply
        #expect(String(decoding: r.body, as: UTF8.self) == "\(body.count) \(expected.value)")
        let done = await client.flowState()
        #expect(!done.frozen && done.unacknowledgedBytes == 0 && done.bytesSent > body.count)
        await client.close()
        await server.close()
    }
}
