import ArgumentParser
import CFerrySystem
import FerryNet
import FerryWebSocket
import Foundation
import Synchronization

/// `ferry-bench ws`: Ferry's WebSocket *client* as a load generator against any echo server
/// (wsload's workloads: ping-pong with a window of 1, or a window of W for throughput), so its
/// rate can be set beside `wsload`'s against the same server in the same run; `wss://` URLs
/// measure TLS.
struct WebSocketClientBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ws",
        abstract: "Ferry's WebSocket client driving an echo server: round trips/s, MB/s, latency, client CPU per message.")

    @Option(help: "Echo server URL (ws:// or wss://).") var url = "ws://127.0.0.1:9001/"
    @Option(help: "pingpong or throughput.") var mode = "pingpong"
    @Option(help: "Connections.") var conns = 1
    @Option(help: "Message size in bytes (suffix k or m).") var size = "32"
    @Option(help: "Throughput: messages in flight per connection.") var window = 4
    @Option(help: "Measured seconds.") var duration = 5.0
    @Option(help: "Warm-up seconds.") var warmup = 1.0
    @Flag(help: "wss://: accept any certificate (benchmarks against a throwaway self-signed server only).")
    var insecure = false

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        guard let bytes = Self.parseSize(size) else { throw ValidationError("bad --size \(size)") }
        let inFlight = mode == "throughput" ? window : 1
        let group = try EventLoopGroup(loopCount: 1, name: "ws-bench")
        var config = WebSocketConfiguration()
        config.maxMessageSize = max(bytes, 1 << 20) * 2
        config.maxFrameSize = config.maxMessageSize
        let tls = insecure ? try TLSContext(client: TLSClientConfiguration(trust: .insecureAcceptAnyCertificate)) : nil
        let parsed = try WebSocketURL(url)
        let stats = BenchStats()
        let payload = (0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        var drivers: [EchoDriver] = []
        for _ in 0..<conns {
            let driver = EchoDriver(payload: payload, inFlight: inFlight, stats: stats)
            let result: Result<WebSocketConnection, WebSocketError> = await withCheckedContinuation { c in
                ClientConnector.connect(to: parsed, on: group.loops[0], configuration: config, tls: tls, handler: driver) { c.resume(returning: $0) }
            }
            _ = try result.get()
            drivers.append(driver)
        }
        let loop = group.loops[0]
        // The drivers are touched only on `loop`: every closure that unboxes them runs there
        // (confinement).
        let all = UncheckedTransfer(drivers)
        _ = loop.execute { for d in all.value { d.begin() } }
        try await Task.sleep(for: .seconds(warmup))
        let (m0, b0, c0) = (stats.messages.load(ordering: .relaxed), stats.bytes.load(ordering: .relaxed), Self.cpuMicros())
        _ = loop.execute { for d in all.value { d.recordLatency = true } }
        let t0 = ferry_monotonic_ns()
        try await Task.sleep(for: .seconds(duration))
        let (m1, b1, c1) = (stats.messages.load(ordering: .relaxed), stats.bytes.load(ordering: .relaxed), Self.cpuMicros())
        let elapsed = Double(ferry_monotonic_ns() - t0) / 1e9
        let latencies: [UInt64] = try await loop.submit { all.value.flatMap { d in d.recordLatency = false; return d.latencies } }.sorted()
        let msgs = Double(m1 - m0) / elapsed
        let mb = Double(b1 - b0) / elapsed / 1e6
        let pct = { (p: Double) -> Double in latencies.isEmpty ? .nan : Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000 }
        print("ferry-bench ws: \(mode), \(conns) conn(s), \(bytes)-byte messages, window \(inFlight), \(String(format: "%.2f", elapsed)) s measured, \(parsed.secure ? "TLS" : "plain")")
        print(String(format: "  %.0f msgs/s   %.2f MB/s echoed payload", msgs, mb))
        print(String(format: "  latency us: p50 %.1f  p99 %.1f", pct(0.5), pct(0.99)))
        print(String(format: "  CPU: client %.0f%% (%.2f us/msg)", Double(c1 - c0) / (elapsed * 1e4), Double(c1 - c0) / Double(max(1, m1 - m0))))
        group.shutdown()
    }

    static func parseSize(_ s: String) -> Int? {
        let lower = s.lowercased()
        if lower.hasSuffix("k") { return Int(lower.dropLast()).map { $0 * 1024 } }
        if lower.hasSuffix("m") { return Int(lower.dropLast()).map { $0 << 20 } }
        return Int(lower)
    }

    /// This process's user + system CPU time, in microseconds.
    static func cpuMicros() -> Int {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1_000_000 + Int(u.ru_utime.tv_usec + u.ru_stime.tv_usec)
    }
}

/// Counters shared between the loop and the reporting task.
final class BenchStats: Sendable {
    let messages = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
}

/// Keeps `inFlight` messages outstanding on one connection and checks each echo.
final class EchoDriver: WebSocketHandler {
    let payload: [UInt8]
    let inFlight: Int
    let stats: BenchStats
    var connection: WebSocketConnection?
    var sentAt: [UInt64] = []
    var recordLatency = false
    var latencies: [UInt64] = []

    init(payload: [UInt8], inFlight: Int, stats: BenchStats) {
        self.payload = payload
        self.inFlight = inFlight
        self.stats = stats
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) { self.connection = connection }

    func begin() {
        guard let connection else { return }
        for _ in 0..<inFlight { sendOne(connection) }
    }

    private func sendOne(_ c: WebSocketConnection) {
        sentAt.append(ferry_monotonic_ns())
        payload.withUnsafeBytes { c.send(.binary, $0) }
    }

    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload echoed: UnsafeRawBufferPointer) {
        let same = echoed.count == payload.count && payload.withUnsafeBytes { mine in
            guard let a = mine.baseAddress, let b = echoed.baseAddress else { return mine.count == 0 }
            return memcmp(a, b, mine.count) == 0
        }
        guard same else {
            FileHandle.standardError.write(Data("ferry-bench ws: echo mismatch\n".utf8))
            exit(1)
        }
        if !sentAt.isEmpty {
            let t = sentAt.removeFirst()
            if recordLatency { latencies.append(ferry_monotonic_ns() - t) }
        }
        stats.messages.add(1, ordering: .relaxed)
        stats.bytes.add(echoed.count, ordering: .relaxed)
        sendOne(connection)
    }

    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {
        self.connection = nil
    }
}
