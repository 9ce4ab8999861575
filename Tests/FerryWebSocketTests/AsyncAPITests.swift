import FerryNet
@_spi(Fuzzing) @testable import FerryWebSocket
import Foundation
import Testing

/// Ferry's async client against Ferry's async server.
@Suite struct AsyncAPITests {
    @Test func upgradeHookSeesTheRequestAndCanRefuse() async throws {
        var config = WebSocketConfiguration()
        config.subprotocols = ["BLIP_3+CBMobile_3"]
        let server = try await WebSocketServer.bind(configuration: config) { req in
            guard req.path == "/db/_blipsync" else { return .refuse(status: 404, message: "no such database") }
            guard req.headers["Authorization"] == "Basic dTpw" else {
                return .refuse(status: 401, message: "login", headers: HTTPHeaders([("WWW-Authenticate", "Basic realm=\"ferry\"")]))
            }
            return .accept(subprotocol: req.negotiateSubprotocol(["BLIP_3+CBMobile_3"]))
        }
        defer { Task { await server.close() } }
        let base = "ws://127.0.0.1:\(server.port)"

        await #expect { _ = try await WebSocket.connect(to: "\(base)/other") } throws: { e in
            if case WebSocketError.upgradeRejected(404, _, _)? = e as? WebSocketError { return true } else { return false }
        }
        var client = WebSocketConfiguration()
        client.subprotocols = ["BLIP_3+CBMobile_4", "BLIP_3+CBMobile_3"]
        await #expect { _ = try await WebSocket.connect(to: "\(base)/db/_blipsync", configuration: client) } throws: { e in
            guard case WebSocketError.upgradeRejected(401, _, let headers)? = e as? WebSocketError else { return false }
            return headers.contains { $0.name == "WWW-Authenticate" }
        }
        client.extraHeaders.add(name: "Authorization", value: "Basic dTpw")
        let ws = try await WebSocket.connect(to: "\(base)/db/_blipsync", configuration: client)
        #expect(ws.subprotocol == "BLIP_3+CBMobile_3")
        var it = server.connections.makeAsyncIterator()
        let accepted = try #require(await it.next())
        #expect(accepted.request?.path == "/db/_blipsync")
        #expect(accepted.subprotocol == "BLIP_3+CBMobile_3")
        try await ws.send(text: "hi")
        #expect(try await accepted.receive() == .text("hi"))
        await ws.close()
        #expect(try await accepted.receive() == nil)
    }

    @Test func connectionRefusedIsATypedError() async throws {
        // Bind and close a listener to get a port nobody listens on.
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let l = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { _ in }
        let port = l.boundAddress.port
        await l.close()
        await #expect(throws: WebSocketError.transport(.connectionRefused)) {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", group: group)
        }
    }

    @Test func ipv6Loopback() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let server = try await WebSocketListener.bind(host: "::1", port: 0, group: group) { _, _ in
            .accept(subprotocol: nil, handler: EchoHandler())
        }
        let ws = try await WebSocket.connect(to: "ws://[::1]:\(server.port)/", group: group)
        try await ws.send(binary: [1, 2, 3])
        #expect(try await ws.receive() == .binary([1, 2, 3]))
        await ws.close()
        await server.close()
    }

    @Test func keepAlivePingDetectsADeadPeer() async throws {
        // A raw TCP peer that completes the handshake and then never answers pings.
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let listener = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { tcp in
            let silent = SilentUpgradePeer()
            tcp.start(handler: silent)
        }
        var config = WebSocketConfiguration()
        config.pingInterval = 0.05
        config.pingTimeout = 0.2
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.boundAddress.port)/", configuration: config, group: group)
        let info = await ws.closed()
        #expect(info.error == .timedOut)
        await listener.close()
    }

    @Test func keepAliveDropsAPeerThatStoppedReading() async throws {
        // The peer answers the handshake, then neither reads nor answers: what we send piles up
        // in both sockets' buffers and our queue. The missed pong must still end the connection
        // (a close that waited to flush the queue first would wait forever).
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let listener = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { tcp in
            let silent = SilentUpgradePeer()
            silent.stopReadingAfterUpgrade = true
            tcp.start(handler: silent)
        }
        var config = WebSocketConfiguration()
        config.pingInterval = 0.05
        config.pingTimeout = 0.3
        config.writeHighWaterMark = 64 << 20
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.boundAddress.port)/", configuration: config, group: group)
        // 16 MiB queued: far more than the two kernel buffers hold. The sends fail once the
        // connection is dropped.
        let writer = Task {
            for _ in 0..<16 { try await ws.send(binary: [UInt8](repeating: 7, count: 1 << 20)) }
        }
        let info = await ws.closed()
        _ = await writer.result
        #expect(info.error == .timedOut)
        await listener.close()
    }

    /// Shutting a loop down fails its connections with a typed error instead of hanging them.
    @Test func loopShutdownFailsOpenConnections() async throws {
        let serverGroup = try EventLoopGroup(loopCount: 1)
        let clientGroup = try EventLoopGroup(loopCount: 1)
        defer { serverGroup.shutdown() }
        let server = try await startEchoServer(group: serverGroup)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(server.port)/", group: clientGroup)
        try await ws.send(text: "x")
        #expect(try await ws.receive() == .text("x"))
        clientGroup.shutdown()
        let info = await ws.closed()
        #expect(info.error == .transport(.loopShutDown))
        await #expect(throws: WebSocketError.self) { try await ws.send(text: "after") }
        await server.close()
    }

    @Test func manyMessagesInOrderWithBoundedInboundBuffer() async throws {
        var config = WebSocketConfiguration()
        config.inboundBufferLimit = 4
        let server = try await WebSocketServer.bind(configuration: config)
        let n = 2_000
        let receiver = Task { () -> [Int] in
            var seen: [Int] = []
            for await ws in server.connections {
                for try await m in ws.messages {
                    if case .text(let s) = m, let i = Int(s) { seen.append(i) }
                }
                break
            }
            return seen
        }
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(server.port)/")
        for i in 0..<n { try await ws.send(text: String(i)) }
        await ws.close()
        #expect(try await receiver.value == Array(0..<n))
        await server.close()
    }
}

/// Answers the upgrade, then ignores everything (no pongs): a dead peer for keep-alive tests.
final class SilentUpgradePeer: ConnectionHandler {
    var parser = HTTPHeadAccumulator()
    var upgraded = false
    /// Stop reading from the socket once upgraded (a peer whose process froze).
    var stopReadingAfterUpgrade = false
    func connectionRead(_ tcp: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        guard !upgraded, let (head, _) = try? parser.feed(UnsafeRawBufferPointer(bytes)),
              let req = try? ServerHandshake.parseRequest(head), let offer = try? ServerHandshake.validate(req) else { return }
        upgraded = true
        tcp.write(ServerHandshake.acceptResponse(acceptValue: offer.acceptValue, subprotocol: nil))
        if stopReadingAfterUpgrade { tcp.pauseReading() }
    }
    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) {}
    func connectionClosed(_ connection: TCPConnection, error: NetError?) {}
}
