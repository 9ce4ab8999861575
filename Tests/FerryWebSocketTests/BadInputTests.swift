import FerryNet
@_spi(Fuzzing) @testable import FerryWebSocket
import Foundation
import Testing

/// Bad input over real sockets: each case gets its close code or HTTP status, and a healthy
/// connection on the same server keeps echoing throughout.
@Suite(.serialized) struct BadInputTests {
    static func withServer(_ config: WebSocketConfiguration = WebSocketConfiguration(),
                           _ body: (Int, WebSocket) async throws -> Void) async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let server = try await startEchoServer(config, group: group)
        let healthy = try await WebSocket.connect(to: "ws://127.0.0.1:\(server.port)/", group: group)
        try await body(server.port, healthy)
        // The healthy connection still echoes after the bad one was dealt with.
        try await healthy.send(text: "still here")
        #expect(try await healthy.receive() == .text("still here"))
        await healthy.close()
        await server.close()
    }

    static func statusLine(_ bytes: [UInt8]) -> String {
        String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n").first ?? ""
    }

    @Test func malformedHandshakeGets400() async throws {
        try await Self.withServer { port, _ in
            let c = try RawClient(port: port)
            c.send("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n")
            let answer = c.readToEnd()
            #expect(Self.statusLine(answer) == "HTTP/1.1 400 Bad Request")
            #expect(String(decoding: answer, as: UTF8.self).contains("Sec-WebSocket-Key"))
        }
    }

    @Test func plainHTTPGets426() async throws {
        try await Self.withServer { port, _ in
            let c = try RawClient(port: port)
            c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = String(decoding: c.readToEnd(), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 426 Upgrade Required"))
            #expect(answer.contains("Upgrade: websocket"))
        }
    }

    @Test func oversizeHeadGets431() async throws {
        var config = WebSocketConfiguration()
        config.maxHeaderSize = 1024
        try await Self.withServer(config) { port, _ in
            let c = try RawClient(port: port)
            c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + String(repeating: "a", count: 2000) + "\r\n\r\n")
            #expect(Self.statusLine(c.readToEnd()) == "HTTP/1.1 431 Request Header Fields Too Large")
        }
    }

    @Test func slowlorisHandshakeTimesOut() async throws {
        var config = WebSocketConfiguration()
        config.handshakeTimeout = 0.3
        try await Self.withServer(config) { port, _ in
            let c = try RawClient(port: port)
            c.send("GET / HTTP/1.1\r\nHost: x\r\n")   // and never the rest
            #expect(Self.statusLine(c.readToEnd()) == "HTTP/1.1 408 Request Timeout")
        }
    }

    static let badFrames: [(String, [UInt8], UInt16)] = [
        ("unmasked client frame", [0x81, 0x02, 0x68, 0x69] as [UInt8], 1002 as UInt16),
        ("reserved opcode", RawClient.frame(0x3, [1, 2]), 1002),
        ("bad length (64-bit with MSB set)", [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4], 1002),
        ("invalid UTF-8", RawClient.frame(0x1, [0x68, 0xC3, 0x28]), 1007),
        ("oversize message", [0x82, 0xFF, 0, 0, 0, 0, 0x04, 0, 0, 0, 1, 2, 3, 4], 1009),
    ]

    @Test(arguments: badFrames)
    func badFrameClosesWithCode(name: String, bytes: [UInt8], code: UInt16) async throws {
        var config = WebSocketConfiguration()
        config.maxMessageSize = 1 << 20
        config.maxFrameSize = 1 << 20
        try await Self.withServer(config) { port, _ in
            let c = try RawClient(port: port)
            let rest = try c.upgrade()
            c.send(bytes)
            let frames = serverFrames(rest + c.readToEnd())
            #expect(closeCode(frames) == code, "\(name)")
        }
    }

    @Test func connectionLimitAnswers503() async throws {
        var config = WebSocketConfiguration()
        config.maxConnections = 1
        try await Self.withServer(config) { port, healthy in
            // `healthy` holds the only slot.
            let c = try RawClient(port: port)
            c.send(ClientHandshake().request(hostHeader: "127.0.0.1", target: "/"))
            #expect(Self.statusLine(c.readToEnd()) == "HTTP/1.1 503 Service Unavailable")
        }
    }
}
