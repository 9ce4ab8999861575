import FerryNet
@_spi(Fuzzing) @testable import FerryWebSocket
import FerryTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Golden vectors from Protocol/vectors/websocket.hex, by name.
let goldenVectors = namedHexVectors("websocket.hex")

func pattern(_ n: Int) -> [UInt8] { (0..<n).map { UInt8($0 % 251) } }

/// A large test payload, built without per-element generic overhead (tests run unoptimised).
func fastPattern(_ n: Int, seed: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: n) { buf, count in
        var x = UInt32(truncatingIfNeeded: seed) | 1
        for i in 0..<n { x = x &* 1_103_515_245 &+ 12_345; buf[i] = UInt8(truncatingIfNeeded: x >> 16) }
        count = n
    }
}

/// Compares two messages with memcmp (generic `==` on 16 MiB arrays is slow in debug builds).
func sameBytes(_ a: WebSocketMessage?, _ b: WebSocketMessage) -> Bool {
    guard let a, a.kind == b.kind else { return false }
    let x = a.bytes, y = b.bytes
    return x.count == y.count && x.withUnsafeBytes { p in y.withUnsafeBytes { q in memcmp(p.baseAddress!, q.baseAddress!, x.count) == 0 } }
}

/// A blocking TCP client for sending arbitrary bytes to a server under test. Reads wait up to a
/// deadline (SO_RCVTIMEO) rather than sleeping.
final class RawClient {
    let fd: Int32

    init(port: Int, host: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port)).bigEndian
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { throw NetError.system(operation: "connect", errno: errno) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    func send(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            off += n
        }
    }

    func send(_ s: String) { send(Array(s.utf8)) }

    /// Reads until the peer closes (or the deadline passes); returns everything read.
    func readToEnd() -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return out }
            out.append(contentsOf: buf[..<n])
        }
    }

    /// Reads until `count` bytes arrived or the peer closed.
    func read(atLeast count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while out.count < count {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out.append(contentsOf: buf[..<n])
        }
        return out
    }

    /// Performs a valid client handshake (offering permessage-deflate with `deflate`); returns
    /// bytes that followed the 101 head.
    @discardableResult
    func upgrade(path: String = "/", deflate: PerMessageDeflateOptions? = nil) throws -> [UInt8] {
        let hs = ClientHandshake(permessageDeflate: deflate)
        send(hs.request(hostHeader: "127.0.0.1", target: path))
        var parser = HTTPHeadAccumulator()
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { throw WebSocketError.invalidUpgradeResponse("closed") }
            if let (head, rest) = try buf.withUnsafeBytes({ try parser.feed(UnsafeRawBufferPointer(rebasing: $0[..<n])) }) {
                _ = try hs.validate(try ClientHandshake.parseResponse(head))
                return rest
            }
        }
    }

    /// A masked client frame.
    static func frame(_ op: UInt8, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        guard let opcode = Opcode(rawValue: op) else {
            // Reserved opcodes cannot be built through FrameHeader; write the bytes by hand.
            var f: [UInt8] = [(fin ? 0x80 : 0) | op, 0x80 | UInt8(payload.count), 1, 2, 3, 4]
            for (i, b) in payload.enumerated() { f.append(b ^ [1, 2, 3, 4][i % 4]) }
            return f
        }
        return FrameEncoder.encode(FrameHeader(fin: fin, opcode: opcode, maskKey: (1, 2, 3, 4), payloadLength: payload.count), payload: payload)
    }
}

/// Decodes every server frame in `bytes` (unmasked).
func serverFrames(_ bytes: [UInt8]) -> [Frame] {
    var d = FrameDecoder(role: .client, maxFrameSize: 64 << 20)
    d.feed(bytes)
    var out: [Frame] = []
    while let f = try? d.next() { out.append(f) }
    return out
}

/// The close code in the last close frame of `frames`, if any.
func closeCode(_ frames: [Frame]) -> UInt16? {
    guard let f = frames.last(where: { $0.header.opcode == .close }), f.payload.count >= 2 else { return nil }
    return UInt16(f.payload[0]) << 8 | UInt16(f.payload[1])
}

/// Echoes every message at loop level.
final class EchoHandler: WebSocketHandler {
    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        connection.send(kind, payload)
    }
    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {}
}

/// A loop-level echo server on a free port.
func startEchoServer(_ config: WebSocketConfiguration = WebSocketConfiguration(), group: EventLoopGroup) async throws -> WebSocketListener {
    try await WebSocketListener.bind(host: "127.0.0.1", port: 0, group: group, configuration: config) { _, _ in
        .accept(subprotocol: nil, handler: EchoHandler())
    }
}

/// The Python interpreter with `websockets` installed: $FERRY_PYTHON, or the repo's .venv.
let interopPython: String? = {
    let candidates = [ProcessInfo.processInfo.environment["FERRY_PYTHON"],
                      packageRoot.appendingPathComponent(".venv/bin/python").path].compactMap { $0 }
    for c in candidates where FileManager.default.isExecutableFile(atPath: c) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: c)
        p.arguments = ["-c", "import websockets.asyncio.server"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        if (try? p.run()) != nil { p.waitUntilExit(); if p.terminationStatus == 0 { return c } }
    }
    return nil
}()

/// Runs a Python interop script; returns the process and a line reader of its stdout.
/// Safety of `@unchecked Sendable`: one test owns a peer; its blocking reads run on a helper
/// thread (`offPool`) while that test awaits them, so no two threads use it at once.
final class PythonPeer: @unchecked Sendable {
    let process = Process()
    let stdout = Pipe()

    init(script: String, arguments: [String] = []) throws {
        guard let python = interopPython else { throw NetError.invalidAddress("no python with websockets") }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [packageRoot.appendingPathComponent("Tests/FerryWebSocketTests/Interop/\(script)").path] + arguments
        process.standardOutput = stdout
        try process.run()
    }

    /// The next line of output (blocking until it arrives or the process exits).
    func readLine() -> String? {
        var line: [UInt8] = []
        let fd = stdout.fileHandleForReading.fileDescriptor
        while true {
            var byte: UInt8 = 0
            let n = Glibc.read(fd, &byte, 1)
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == 10 { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
    }

    /// Everything left on stdout, after the process exits.
    func finish() -> (status: Int32, output: String) {
        let rest = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: rest, as: UTF8.self))
    }

    /// Kills the peer (SIGKILL: servers may treat SIGTERM as "close gracefully" and linger).
    func terminate() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
