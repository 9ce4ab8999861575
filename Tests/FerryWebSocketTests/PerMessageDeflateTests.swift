import FerryNet
@_spi(Fuzzing) @testable import FerryWebSocket
import Foundation
import Testing

/// Collects what a state machine reports, copying borrowed payloads.
final class EventLog {
    var messages: [WebSocketMessage] = []
    var failure: WebSocketError?

    func record(_ event: WebSocketEvent) {
        switch event {
        case let .message(kind, payload):
            messages.append(kind == .text ? .text(String(decoding: payload, as: UTF8.self)) : .binary(Array(payload)))
        case .failed(let e): failure = e
        default: break
        }
    }
}

/// Feeds `bytes` to `machine` in pieces of `step` bytes (each piece a separate read).
func feed(_ machine: WebSocketStateMachine, _ bytes: [UInt8], step: Int? = nil, into log: EventLog) {
    let step = max(step ?? bytes.count, 1)
    var offset = 0
    while offset < bytes.count {
        var piece = Array(bytes[offset..<min(offset + step, bytes.count)])
        offset += step
        piece.withUnsafeMutableBytes { raw in machine.receive(raw) { log.record($0) } }
    }
}

/// permessage-deflate in the sans-I/O state machine: round trips through real negotiation,
/// RSV1 rules, bad compressed data, and the decompression-bomb guard.
@Suite struct PerMessageDeflateTests {
    /// Runs the handshake functions for `options` on both sides; returns (client, server) agreements.
    static func negotiate(client: PerMessageDeflateOptions, server: PerMessageDeflateOptions) throws
        -> (PerMessageDeflateAgreement, PerMessageDeflateAgreement) {
        let offer = PerMessageDeflateNegotiation.clientOffer(client)
        let accepted = try #require(PerMessageDeflateNegotiation.serverAccept(offers: [offer], options: server))
        let agreed = try #require(try PerMessageDeflateNegotiation.clientAccept(response: [accepted.header], offered: client))
        return (agreed, accepted.agreement)
    }

    struct Setup: Sendable, CustomStringConvertible {
        let name: String, client: PerMessageDeflateOptions, server: PerMessageDeflateOptions
        var description: String { name }
    }

    static let setups: [Setup] = {
        var level0 = PerMessageDeflateOptions(); level0.compressionLevel = 0
        var level9 = PerMessageDeflateOptions(serverMaxWindowBits: 9); level9.compressionLevel = 9
        var minSize = PerMessageDeflateOptions(); minSize.minimumSize = 100
        return [
            Setup(name: "context takeover", client: PerMessageDeflateOptions(), server: PerMessageDeflateOptions()),
            Setup(name: "no context takeover, asked by the client", client: PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true),
                  server: PerMessageDeflateOptions()),
            Setup(name: "no context takeover, imposed by the server", client: PerMessageDeflateOptions(),
                  server: PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true)),
            Setup(name: "8-bit windows", client: PerMessageDeflateOptions(serverMaxWindowBits: 8, clientMaxWindowBits: 8),
                  server: PerMessageDeflateOptions()),
            Setup(name: "9/10-bit windows from the server", client: PerMessageDeflateOptions(),
                  server: PerMessageDeflateOptions(serverMaxWindowBits: 9, clientMaxWindowBits: 10)),
            Setup(name: "level 0 client, level 9 server", client: level0, server: level9),
            Setup(name: "minimum size 100", client: minSize, server: minSize),
        ]
    }()

    static func messages() -> [WebSocketMessage] {
        let doc = "{\"_id\":\"doc\",\"lines\":[" + String(repeating: "{\"sku\":\"A-1\",\"qty\":2},", count: 40) + "]} — ünïcode 😀"
        var out: [WebSocketMessage] = [.text(""), .binary([]), .text("a"), .binary([0]), .text(doc), .text(doc), .binary(pattern(5000))]
        out.append(.binary(fastPattern(70_000, seed: 3)))                     // incompressible, > 64 KiB
        out.append(.binary([UInt8](repeating: 7, count: 300_000)))             // very compressible
        out.append(.text(String(repeating: "Ferry replicates documents. ", count: 10_000)))
        out.append(.text(doc))
        return out
    }

    @Test(arguments: setups)
    func roundTripsBothWays(_ setup: Setup) throws {
        let (clientAgreement, serverAgreement) = try Self.negotiate(client: setup.client, server: setup.server)
        var config = WebSocketConfiguration()
        config.maxMessageSize = 1 << 20
        var toServer: [UInt8] = [], toClient: [UInt8] = []
        let client = WebSocketStateMachine(role: .client, configuration: config, deflate: clientAgreement) { toServer.append(contentsOf: $0) }
        let server = WebSocketStateMachine(role: .server, configuration: config, deflate: serverAgreement) { toClient.append(contentsOf: $0) }
        let messages = Self.messages()
        for (sender, receiver, role) in [(client, server, WebSocketRole.server), (server, client, .client)] {
            for step in [nil, 7] as [Int?] {
                toServer = []; toClient = []
                for m in messages { m.bytes.withUnsafeBytes { sender.send(m.kind, $0) } }
                // The same messages again, fragmented (every 1000 bytes, and a trailing empty fragment).
                for m in messages {
                    let bytes = m.bytes
                    bytes.withUnsafeBytes { raw in
                        var offset = 0
                        repeat {
                            let end = min(offset + 1000, raw.count)
                            sender.sendFragment(m.kind, UnsafeRawBufferPointer(rebasing: raw[offset..<end]), fin: false)
                            offset = end
                        } while offset < raw.count
                        sender.sendFragment(m.kind, UnsafeRawBufferPointer(start: nil, count: 0), fin: true)
                    }
                }
                let wire = role == .server ? toServer : toClient
                // RSV1 only on the first frame of a message, and only on messages of minimumSize or more.
                var decoder = FrameDecoder(role: role, maxFrameSize: 1 << 22, allowedRSV: 4)
                decoder.feed(wire)
                var firstOfMessage = true
                while let f = try decoder.next() {
                    if firstOfMessage {
                        #expect(f.header.rsv == 4 || setup.client.minimumSize > 0, "uncompressed first frame")
                    } else {
                        #expect(f.header.rsv == 0, "RSV1 on a continuation")
                    }
                    firstOfMessage = f.header.fin
                }
                let log = EventLog()
                feed(receiver, wire, step: step, into: log)
                #expect(log.failure == nil)
                #expect(log.messages == messages + messages, "to the \(role), step \(step ?? 0)")
            }
        }
    }

    @Test func smallMessagesGoUncompressedBelowTheMinimumSize() throws {
        var options = PerMessageDeflateOptions()
        options.minimumSize = 10
        let (_, server) = try Self.negotiate(client: options, server: options)
        var out: [UInt8] = []
        let m = WebSocketStateMachine(role: .server, deflate: server) { out.append(contentsOf: $0) }
        Array("Hello".utf8).withUnsafeBytes { m.send(.text, $0) }
        #expect(out == goldenVectors["text-unmasked-hello"])
    }

    // MARK: Errors

    /// A masked client frame with reserved bits.
    static func clientFrame(_ op: Opcode, _ payload: [UInt8], fin: Bool = true, rsv: UInt8) -> [UInt8] {
        FrameEncoder.encode(FrameHeader(fin: fin, rsv: rsv, opcode: op, maskKey: (9, 8, 7, 6), payloadLength: payload.count), payload: payload)
    }

    /// Feeds frames to a server machine (deflate on or off); returns the log and the close code it sent.
    static func serverReceives(_ frames: [[UInt8]], deflate: Bool = true, maxMessageSize: Int = 16 << 20)
        -> (log: EventLog, code: UInt16?, machine: WebSocketStateMachine) {
        var config = WebSocketConfiguration()
        config.maxMessageSize = maxMessageSize
        var out: [UInt8] = []
        let agreement = deflate ? GoldenVectorTests.deflateAgreement(.server) : nil
        let m = WebSocketStateMachine(role: .server, configuration: config, deflate: agreement) { out.append(contentsOf: $0) }
        let log = EventLog()
        feed(m, frames.flatMap { $0 }, into: log)
        return (log, closeCode(serverFrames(out)), m)
    }

    static let hello: [UInt8] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]

    @Test func rsv1WithoutNegotiationIsAProtocolError() {
        let r = Self.serverReceives([Self.clientFrame(.text, Self.hello, rsv: 4)], deflate: false)
        #expect(r.code == 1002 && r.log.messages.isEmpty)
    }

    @Test func rsv1OnAContinuationIsAProtocolError() {
        let r = Self.serverReceives([Self.clientFrame(.text, Array(Self.hello[..<3]), fin: false, rsv: 4),
                                     Self.clientFrame(.continuation, Array(Self.hello[3...]), rsv: 4)])
        #expect(r.code == 1002 && r.log.messages.isEmpty)
    }

    @Test func rsv1OnAControlFrameOrRSV2IsAProtocolError() {
        #expect(Self.serverReceives([Self.clientFrame(.ping, [1], rsv: 4)]).code == 1002)
        #expect(Self.serverReceives([Self.clientFrame(.text, Self.hello, rsv: 2)]).code == 1002)
    }

    @Test func uncompressedMessagesStillFlowWhenNegotiated() {
        let r = Self.serverReceives([Self.clientFrame(.text, Array("plain".utf8), rsv: 0), Self.clientFrame(.text, Self.hello, rsv: 4)])
        #expect(r.log.failure == nil && r.log.messages == [.text("plain"), .text("Hello")])
    }

    @Test(arguments: [[UInt8]([0xff, 0xff, 0xff]),              // reserved block type
                      [0xf2, 0x48, 0xcd],                       // truncated: not at a block boundary
                      [0x00, 0x05, 0x00, 0x00, 0x00]])          // stored block with a bad length check
    func invalidCompressedDataFailsWith1007(_ payload: [UInt8]) {
        let r = Self.serverReceives([Self.clientFrame(.binary, payload, rsv: 4)])
        #expect(r.code == 1007 && r.log.messages.isEmpty)
        if case .invalidCompressedData = r.log.failure {} else { Issue.record("failure \(String(describing: r.log.failure))") }
    }

    @Test func invalidUTF8InsideACompressedTextFailsWith1007() throws {
        let deflater = try #require(MessageDeflater(level: 6, windowBits: 15, memoryLevel: 8, noContextTakeover: false))
        let compressed = [UInt8]([0x61, 0xff, 0x62].withUnsafeBytes { deflater.compress($0, final: true) })
        let r = Self.serverReceives([Self.clientFrame(.text, compressed, rsv: 4)])
        #expect(r.code == 1007 && r.log.failure == .invalidUTF8)
    }

    // MARK: Decompression bomb

    /// A compressed binary frame of `megabytes` MiB of zeros (deflated a MiB at a time).
    static func zeroBomb(megabytes: Int, extraBytes: Int = 0) throws -> [UInt8] {
        let deflater = try #require(MessageDeflater(level: 9, windowBits: 15, memoryLevel: 9, noContextTakeover: false))
        let mib = [UInt8](repeating: 0, count: 1 << 20)
        var payload: [UInt8] = []
        for _ in 0..<megabytes { mib.withUnsafeBytes { payload += deflater.compress($0, final: false) } }
        [UInt8](repeating: 0, count: extraBytes).withUnsafeBytes { payload += deflater.compress($0, final: true) }
        return clientFrame(.binary, payload, rsv: 4)
    }

    @Test func aSmallMessageInflatingPastTheLimitClosesWith1009WithoutAllocatingIt() throws {
        let limit = 1 << 20
        let bomb = try Self.zeroBomb(megabytes: 100)
        #expect(bomb.count < 200 * 1024, "the bomb is small on the wire: \(bomb.count) bytes")
        for (frames, name) in [([bomb], "whole"), (stride(from: 0, to: bomb.count, by: 4096).map { Array(bomb[$0..<min($0 + 4096, bomb.count)]) }, "split")] {
            var config = WebSocketConfiguration()
            config.maxMessageSize = limit
            var out: [UInt8] = []
            let m = WebSocketStateMachine(role: .server, configuration: config, deflate: GoldenVectorTests.deflateAgreement(.server)) {
                out.append(contentsOf: $0)
            }
            let log = EventLog()
            for f in frames { feed(m, f, into: log) }
            #expect(log.failure == .messageTooBig(limit: limit), "\(name)")
            #expect(closeCode(serverFrames(out)) == 1009, "\(name)")
            #expect(log.messages.isEmpty)
            // The inflated bytes went into one buffer that never grew past the limit (+1 byte to
            // see it was crossed): 100 MiB were never allocated.
            let peak = try #require(m.inflater?.peakCapacity)
            #expect(peak > limit / 2 && peak <= limit + 1, "\(name): peak output buffer \(peak)")
        }
    }

    @Test func aMessageInflatingExactlyToTheLimitIsDelivered() throws {
        let limit = 1 << 20
        let r = Self.serverReceives([try Self.zeroBomb(megabytes: 0, extraBytes: limit)], maxMessageSize: limit)
        #expect(r.log.failure == nil)
        #expect(r.log.messages.first?.bytes.count == limit)
        let over = Self.serverReceives([try Self.zeroBomb(megabytes: 0, extraBytes: limit + 1)], maxMessageSize: limit)
        #expect(over.code == 1009)
    }

    // MARK: Over sockets

    @Test func aBombOverASocketClosesWith1009() async throws {
        let group = try EventLoopGroup(loopCount: 1, name: "deflate-bomb")
        defer { group.shutdown() }
        var config = WebSocketConfiguration()
        config.maxMessageSize = 1 << 20
        config.permessageDeflate = PerMessageDeflateOptions()
        let listener = try await startEchoServer(config, group: group)
        let client = try RawClient(port: listener.port)
        try client.upgrade(deflate: PerMessageDeflateOptions())
        client.send(try Self.zeroBomb(megabytes: 20))
        #expect(closeCode(serverFrames(client.readToEnd())) == 1009)
        await listener.close()
    }

    @Test func asyncClientAndServerNegotiateAndEcho() async throws {
        for (clientOptions, serverOptions) in [(PerMessageDeflateOptions(), PerMessageDeflateOptions()),
                                               (PerMessageDeflateOptions(serverNoContextTakeover: true, clientMaxWindowBits: 9),
                                                PerMessageDeflateOptions(clientNoContextTakeover: true, serverMaxWindowBits: 10)),
                                               (nil, PerMessageDeflateOptions()), (PerMessageDeflateOptions(), nil)] as [(PerMessageDeflateOptions?, PerMessageDeflateOptions?)] {
            var serverConfig = WebSocketConfiguration()
            serverConfig.permessageDeflate = serverOptions
            let server = try await WebSocketServer.bind(port: 0, configuration: serverConfig)
            let serving = Task {
                for await ws in server.connections {
                    for try await m in ws.messages { try await ws.send(m) }
                    return ws.permessageDeflate
                }
                return nil
            }
            var clientConfig = WebSocketConfiguration()
            clientConfig.permessageDeflate = clientOptions
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(server.port)/", configuration: clientConfig)
            let both = clientOptions != nil && serverOptions != nil
            #expect((ws.permessageDeflate != nil) == both)
            for m in Self.messages() {
                try await ws.send(m)
                #expect(try await ws.receive() == m)
            }
            try await ws.send(.binary(pattern(50_000)), fragmentSize: 4000)
            #expect(try await ws.receive() == .binary(pattern(50_000)))
            let info = await ws.close()
            #expect(info.error == nil && info.code == .normalClosure)
            let serverSide = try await serving.value
            #expect((serverSide != nil) == both)
            if both, let s = serverSide, let c = ws.permessageDeflate {
                #expect(s.sendNoContextTakeover == c.receiveNoContextTakeover && s.receiveNoContextTakeover == c.sendNoContextTakeover)
                #expect(s.response == c.response)
            }
            await server.close()
        }
    }
}
