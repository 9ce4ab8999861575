import FerryNet
@testable import FerryWebSocket
import FerryTestSupport
import Foundation
import Testing

/// Ferry against Python's `websockets` over real sockets, both roles. Needs a Python with
/// `websockets` (scripts/test makes .venv; or set FERRY_PYTHON); skipped where there is none.
@Suite(.serialized, .enabled(if: interopPython != nil, "needs Python with websockets: run scripts/test or set FERRY_PYTHON"))
struct InteropTests {
    @Test func ferryClientAgainstPythonServer() async throws {
        let peer = try PythonPeer(script: "ws_echo_server.py")
        defer { peer.terminate() }
        let line = try #require(await offPool { peer.readLine() })
        let port = try #require(Int(line.replacingOccurrences(of: "PORT ", with: "")))
        var config = WebSocketConfiguration()
        config.maxMessageSize = 32 << 20
        config.maxFrameSize = 32 << 20
        let url = "ws://127.0.0.1:\(port)/"
        let ws = try await WebSocket.connect(to: url, configuration: config)

        for size in [0, 1, 125, 126, 127, 65535, 65536, 65537, 1 << 20, 16 << 20] {
            let data = fastPattern(size, seed: size)
            try await ws.send(binary: data)
            #expect(sameBytes(try await ws.receive(), .binary(data)), "binary \(size)")
            let text = String(String(repeating: "aé€😀", count: size / 10 + 1).prefix(size / 4))
            try await ws.send(text: text)
            #expect(try await ws.receive() == .text(text), "text \(size / 4)")
        }
        try await exchangeFragments(ws)
        // Ping/pong both ways.
        try await ws.ping([1, 2, 3])
        try await ws.send(text: "ping")
        #expect(try await ws.receive() == .text("pong received"))
        // Client-initiated close: the code is echoed.
        let info = await ws.close(code: CloseCode(4002), reason: "bye")
        #expect(info.code == CloseCode(4002) && info.error == nil)

        // Server-initiated close with a code and a reason.
        let ws2 = try await WebSocket.connect(to: url, configuration: config)
        try await ws2.send(text: "close 4003 server says bye")
        var received: [WebSocketMessage] = []
        for try await m in ws2.messages { received.append(m) }
        #expect(received.isEmpty)
        let info2 = await ws2.closed()
        #expect(info2.code == CloseCode(4003) && info2.reason == "server says bye" && info2.error == nil)
        // Abrupt drop: 1006 and an error, surfaced by the message stream.
        let ws3 = try await WebSocket.connect(to: url, configuration: config)
        try await ws3.send(text: "drop")
        await #expect(throws: WebSocketError.self) { for try await _ in ws3.messages {} }
        #expect(await ws3.closed().code == .abnormalClosure)
    }

    @Test func pythonClientAgainstFerryServer() async throws {
        var config = WebSocketConfiguration()
        config.maxMessageSize = 32 << 20
        config.maxFrameSize = 32 << 20
        let server = try await WebSocketServer.bind(port: 0, configuration: config)
        let serving = Task {
            var closes: [WebSocket.CloseInfo] = []
            await withTaskGroup(of: WebSocket.CloseInfo.self) { tasks in
                for await ws in server.connections {
                    tasks.addTask {
                        do {
                            for try await m in ws.messages {
                                if m == .text("close-me") { return await ws.close(code: CloseCode(4000), reason: "asked") }
                                try await ws.send(m)
                            }
                        } catch {}
                        return await ws.closed()
                    }
                }
                for await c in tasks { closes.append(c) }
            }
            return closes
        }
        let peer = try PythonPeer(script: "ws_client.py", arguments: ["ws://127.0.0.1:\(server.port)/"])
        let (status, output) = await offPool { peer.finish() }
        #expect(status == 0, "\(output)")
        #expect(output.contains(" passed, 0 failed"), "\(output)")
        await server.close()
        let closes = await serving.value
        // Every connection the Python client opened was closed cleanly by one side or the other.
        #expect(closes.count >= 5)
        #expect(closes.contains { $0.code == CloseCode(4001) })
        #expect(closes.allSatisfy { $0.error == nil }, "\(closes)")
    }

    // MARK: permessage-deflate (RFC 7692)

    /// Ferry's offer against the Python server's settings: `takeover` (websockets' defaults) or
    /// `no-takeover` (server and client no_context_takeover, windows 10/11, imposed by the
    /// server); and Ferry asking for no context takeover and small windows itself.
    @Test(arguments: [("takeover", PerMessageDeflateOptions()),
                      ("no-takeover", PerMessageDeflateOptions()),
                      ("takeover", PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                            serverMaxWindowBits: 9, clientMaxWindowBits: 12))])
    func ferryClientAgainstPythonServerWithDeflate(_ mode: String, _ options: PerMessageDeflateOptions) async throws {
        let peer = try PythonPeer(script: "ws_echo_server.py", arguments: ["--deflate", mode])
        defer { peer.terminate() }
        let line = try #require(await offPool { peer.readLine() })
        let port = try #require(Int(line.replacingOccurrences(of: "PORT ", with: "")))
        var config = WebSocketConfiguration()
        config.permessageDeflate = options
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", configuration: config)
        let agreement = try #require(ws.permessageDeflate)
        let asked = options.serverNoContextTakeover
        #expect(agreement.receiveNoContextTakeover == (mode == "no-takeover" || asked))
        #expect(agreement.sendNoContextTakeover == (mode == "no-takeover" || options.clientNoContextTakeover))
        if mode == "no-takeover" { #expect(agreement.receiveMaxWindowBits == 10 && agreement.sendMaxWindowBits == 11) }
        if asked { #expect(agreement.receiveMaxWindowBits == 9) }
        // Python's view of the same agreement.
        try await ws.send(text: "extensions")
        guard case .text(let described) = try await ws.receive() else { Issue.record("no description"); return }
        #expect(described.hasPrefix("permessage-deflate local_nct=\(agreement.receiveNoContextTakeover ? "True" : "False") "
                                    + "remote_nct=\(agreement.sendNoContextTakeover ? "True" : "False")"), "\(described)")

        for size in [0, 1, 125, 126, 65536, 1 << 20] {
            let data = fastPattern(size, seed: size)
            try await ws.send(binary: data)
            #expect(sameBytes(try await ws.receive(), .binary(data)), "binary \(size)")
            let zeros = [UInt8](repeating: 0, count: size)
            try await ws.send(binary: zeros)
            #expect(sameBytes(try await ws.receive(), .binary(zeros)), "zeros \(size)")
            let text = String(String(repeating: "aé€😀", count: size / 10 + 1).prefix(size / 4))
            try await ws.send(text: text)
            #expect(try await ws.receive() == .text(text), "text \(size / 4)")
        }
        // The same document again and again: with context takeover each refers to the last.
        let doc = "{\"_id\":\"doc\",\"lines\":[" + String(repeating: "{\"sku\":\"A-1\",\"qty\":2},", count: 20) + "]}"
        for i in 0..<30 {
            try await ws.send(text: doc + "\(i)")
            #expect(try await ws.receive() == .text(doc + "\(i)"))
        }
        try await exchangeFragments(ws)
        let info = await ws.close(code: CloseCode(4002), reason: "bye")
        #expect(info.code == CloseCode(4002) && info.error == nil)
    }

    /// Python's offer (`takeover`: websockets' default offer; `no-takeover`: asks for both
    /// no_context_takeover and server_max_window_bits=9) against Ferry's server settings (its
    /// defaults, or imposing no context takeover and windows 10/11).
    @Test(arguments: [("takeover", PerMessageDeflateOptions()),
                      ("no-takeover", PerMessageDeflateOptions()),
                      ("takeover", PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                            serverMaxWindowBits: 10, clientMaxWindowBits: 11))])
    func pythonClientAgainstFerryServerWithDeflate(_ mode: String, _ options: PerMessageDeflateOptions) async throws {
        var config = WebSocketConfiguration()
        config.maxMessageSize = 32 << 20
        config.maxFrameSize = 32 << 20
        config.permessageDeflate = options
        let server = try await WebSocketServer.bind(port: 0, configuration: config)
        let serving = Task {
            var agreements: [PerMessageDeflateAgreement?] = []
            await withTaskGroup(of: (PerMessageDeflateAgreement?, WebSocket.CloseInfo).self) { tasks in
                for await ws in server.connections {
                    tasks.addTask {
                        do {
                            for try await m in ws.messages {
                                if m == .text("close-me") { return (ws.permessageDeflate, await ws.close(code: CloseCode(4000), reason: "asked")) }
                                try await ws.send(m)
                            }
                        } catch {}
                        return (ws.permessageDeflate, await ws.closed())
                    }
                }
                for await (a, c) in tasks {
                    #expect(c.error == nil, "\(c)")
                    agreements.append(a)
                }
            }
            return agreements
        }
        let peer = try PythonPeer(script: "ws_client.py", arguments: ["ws://127.0.0.1:\(server.port)/", "--deflate", mode])
        let (status, output) = await offPool { peer.finish() }
        #expect(status == 0, "\(output)")
        #expect(output.contains(" passed, 0 failed"), "\(output)")
        await server.close()
        let agreements = await serving.value
        #expect(agreements.count >= 6)
        for a in agreements {
            let a = try #require(a, "every connection negotiated permessage-deflate")
            #expect(a.sendNoContextTakeover == (mode == "no-takeover" || options.serverNoContextTakeover))
            #expect(a.receiveNoContextTakeover == (mode == "no-takeover" || options.clientNoContextTakeover))
            #expect(a.sendMaxWindowBits == (mode == "no-takeover" ? 9 : options.serverMaxWindowBits))
        }
    }
}

/// Fragmented messages both ways with the Python echo server: a binary message sent in 7,000-byte
/// fragments, a text message split inside multi-byte characters, and 10 fragments from Python.
func exchangeFragments(_ ws: WebSocket) async throws {
    let big = pattern(100_000)
    try await ws.send(.binary(big), fragmentSize: 7_000)
    #expect(try await ws.receive() == .binary(big))
    try await ws.send(.text("fragmented → ünïcode 😀 across frames"), fragmentSize: 5)
    #expect(try await ws.receive() == .text("fragmented → ünïcode 😀 across frames"))
    try await ws.send(text: "fragments 10 1000")
    #expect(try await ws.receive() == .binary(pattern(10_000)))
}
