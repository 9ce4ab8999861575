import ArgumentParser
import CFerrySystem
import FerryBLIP
import FerryNet
import FerryWebSocket
import Foundation
import Synchronization

/// `ferry-bench blip`: BLIP request/response rate and body throughput over one loopback
/// connection, beside Ferry's raw WebSocket echo of the same payloads in the same run.
struct BLIPBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "blip",
        abstract: "BLIP round trips and throughput beside the raw WebSocket echo (same run).")

    @Option(help: "Seconds per rate measurement.") var seconds = 3.0
    @Option(name: .customLong("big-mib"), help: "Body size for the throughput runs, in MiB.") var bigMiB = 64
    @Option(help: "Echoes per throughput row, raw and BLIP alternating; the medians are reported.") var repeats = 5
    @Option(help: "Run only these rows (comma-separated: rate1, rate64, json64, big, bigstream, bigjson); for profiling.")
    var only: String?
    @Flag(name: .customLong("blip-only"), help: "Skip the raw WebSocket side (for profiling BLIP alone).")
    var blipOnly = false
    @Option(name: .customLong("raw-flush-every"),
            help: "Make the raw WebSocket peers flush their replies every N bytes within a read, as BLIP does (0: FerryNet's default coalescing).")
    var rawFlushEvery = 0

    func wants(_ row: String) -> Bool { only.map { $0.split(separator: ",").contains(Substring(row)) } ?? true }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        // Server and client each get one loop, as two peers would.
        let serverGroup = try EventLoopGroup(loopCount: 1, name: "bench-server")
        let clientGroup = try EventLoopGroup(loopCount: 1, name: "bench-client")
        var wsConfig = WebSocketConfiguration()
        wsConfig.maxMessageSize = 256 << 20
        wsConfig.maxFrameSize = 256 << 20
        let wsServer = try await WebSocketListener.bind(host: "127.0.0.1", port: 0, group: serverGroup, configuration: wsConfig) { _, _ in
            .accept(subprotocol: nil, handler: Echo(flushEvery: rawFlushEvery))
        }
        var blipConfig = BLIPConfiguration()
        blipConfig.maxMessageSize = 256 << 20
        let blipServer = try await BLIPConnection.listen(port: 0, app: "Bench", configuration: blipConfig, group: serverGroup) { conn in
            conn.registerDefault { req in req.respond(body: req.message.body, compressed: req.message.isCompressed) }
            // Streamed echo: each chunk of the request body is written back as it arrives.
            conn.register(profile: "stream-echo", streaming: { req, body in
                let out = req.respondStreaming()
                Task {
                    do {
                        for try await chunk in body { try await out.write(chunk) }
                        try await out.finish()
                    } catch {
                        out.abort(reason: "\(error)")
                    }
                }
            })
        }
        let blip = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(blipServer.port)/", app: "Bench",
                                                    configuration: blipConfig, group: clientGroup)
        let ws = try await WebSocketDriver.connect(port: wsServer.port, loop: clientGroup.loops[0], configuration: wsConfig)
        ws.flusher = MidReadFlusher(every: rawFlushEvery)

        let kib = [UInt8](repeating: 0x61, count: 1024)
        print("ferry-bench blip: loopback, server and client one event loop each, \(seconds) s per rate cell")
        print("workload                          raw WebSocket      BLIP        BLIP/raw")
        for inFlight in [1, 64] where wants("rate\(inFlight)") {
            let w = blipOnly ? .nan : try await ws.rate(payload: kib, inFlight: inFlight, seconds: seconds)
            let b = try await blipRate(blip, body: kib, compressed: false, inFlight: inFlight)
            row("1 KiB round trips, \(inFlight) in flight", w, b, unit: "msg/s")
        }
        if wants("json64") {
            let json = jsonLike(1024)
            let wj = blipOnly ? .nan : try await ws.rate(payload: json, inFlight: 64, seconds: seconds)
            let bj = try await blipRate(blip, body: json, compressed: true, inFlight: 64)
            row("1 KiB JSON, compressed, 64 in flight", wj, bj, unit: "msg/s")
        }
        if wants("big") {
            let big = noise(bigMiB << 20)
            let (wt, bt) = try await interleaved(raw: { try await ws.throughput(payload: big) },
                                                 blip: { try await blipThroughput(blip, body: big, compressed: false) })
            row("\(bigMiB) MiB body echo", wt, bt, unit: "MB/s")
        }
        if wants("bigstream") {
            // The same echo with BLIP's streamed bodies (neither side holds the body whole):
            // how an application moves large bodies; beside the same raw whole-message echo.
            let big = noise(bigMiB << 20)
            let (wt, bt) = try await interleaved(raw: { try await ws.throughput(payload: big) },
                                                 blip: { try await blipStreamedThroughput(blip, body: big) })
            row("\(bigMiB) MiB body echo, streamed", wt, bt, unit: "MB/s")
        }
        if wants("bigjson") {
            let bigJSON = jsonLike(bigMiB << 20)
            let (wtj, btj) = try await interleaved(raw: { try await ws.throughput(payload: bigJSON) },
                                                   blip: { try await blipThroughput(blip, body: bigJSON, compressed: true) })
            row("\(bigMiB) MiB JSON echo, compressed", wtj, btj, unit: "MB/s")
        }
        print("peak RSS (both peers, one process): \(peakRSSMiB()) MiB")
        await blip.close()
        await blipServer.close()
        await wsServer.close()
    }

    /// Runs a raw and a BLIP throughput measurement `repeats` times, alternating (which goes
    /// first too) so that both see the same machine, and returns the median of each (one 64 MiB
    /// echo lasts ~0.1 s, so a single one mostly measured what else the machine was doing).
    func interleaved(raw: () async throws -> Double, blip: () async throws -> Double) async throws -> (Double, Double) {
        var raws: [Double] = [], blips: [Double] = []
        for i in 0..<max(1, repeats) {
            if i % 2 == 1 { blips.append(try await blip()) }
            if !blipOnly { raws.append(try await raw()) }
            if i % 2 == 0 { blips.append(try await blip()) }
        }
        func median(_ v: [Double]) -> Double { v.isEmpty ? .nan : v.sorted()[v.count / 2] }
        return (median(raws), median(blips))
    }

    func row(_ name: String, _ raw: Double, _ blip: Double, unit: String) {
        let pad = name.padding(toLength: 36, withPad: " ", startingAt: 0)
        print("\(pad)\(fmt(raw).leftPad(10)) \(fmt(blip).leftPad(10)) \(unit.padding(toLength: 6, withPad: " ", startingAt: 0)) \(String(format: "%.2f×", blip / raw))")
    }

    /// Keeps `inFlight` requests outstanding; completions run on the loop (no task hop).
    func blipRate(_ conn: BLIPConnection, body: [UInt8], compressed: Bool, inFlight: Int) async throws -> Double {
        let counter = RateCounter(deadline: ferry_monotonic_ns() + UInt64(seconds * 1e9))
        let request = BLIPMessage.request(profile: "echo", body: body, compressed: compressed)
        let start = ferry_monotonic_ns()
        // One completion closure for every request, as the raw side has one message callback:
        // the measurement is of BLIP, not of allocating a closure per send.
        let refire = Refire()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finish = counter.makeFinish(inFlight: inFlight, done)
            let completion: @Sendable (Result<BLIPMessage, BLIPError>) -> Void = { _ in
                if counter.tick() { refire.fire?() } else { finish() }
            }
            refire.fire = { conn.send(request, completion: completion) }
            for _ in 0..<inFlight { refire.fire?() }
        }
        refire.fire = nil   // breaks the closure ↔ holder cycle
        return Double(counter.count) / (Double(ferry_monotonic_ns() - start) / 1e9)
    }

    func blipThroughput(_ conn: BLIPConnection, body: [UInt8], compressed: Bool) async throws -> Double {
        let start = ferry_monotonic_ns()
        let reply = try await conn.send(.request(profile: "echo", body: body, compressed: compressed))
        guard reply.body.count == body.count else { throw ValidationError("echo lost bytes") }
        return Double(2 * body.count) / 1e6 / (Double(ferry_monotonic_ns() - start) / 1e9)
    }
}

extension BLIPBench {
    /// Streams `body` to the server's `stream-echo` in 64 KiB writes while reading the echo.
    func blipStreamedThroughput(_ conn: BLIPConnection, body: [UInt8]) async throws -> Double {
        let start = ferry_monotonic_ns()
        let request = conn.startRequest(.request(profile: "stream-echo"))
        let writer = request.body
        let upload = Task { () throws -> Void in
            var at = 0
            while at < body.count {
                let end = min(at + 64 * 1024, body.count)
                try await writer.write(Array(body[at..<end]))
                at = end
            }
            try await writer.finish()
        }
        var received = 0
        var intact = true
        for try await chunk in try await request.responseStream().body {
            guard received + chunk.count <= body.count else { intact = false; break }
            intact = intact && chunk.withUnsafeBytes { c in
                body.withUnsafeBytes { b in
                    guard let cb = c.baseAddress, let bb = b.baseAddress else { return c.isEmpty }
                    return memcmp(cb, bb + received, c.count) == 0
                }
            }
            received += chunk.count
        }
        try await upload.value
        guard intact, received == body.count else { throw ValidationError("streamed echo lost or changed bytes") }
        return Double(2 * body.count) / 1e6 / (Double(ferry_monotonic_ns() - start) / 1e9)
    }
}

/// Holds the send closure that the completion calls back into (the two refer to each other).
///
/// Safety of `@unchecked Sendable`: `fire` is set before the first request is sent, read by
/// completions on the client loop, and cleared only after the last completion has run.
final class Refire: @unchecked Sendable {
    var fire: (@Sendable () -> Void)?
}

/// Counts completions until a deadline; shared by the loop's callbacks.
final class RateCounter: Sendable {
    let deadline: UInt64
    private let state = Mutex<(count: Int, outstanding: Int)>((0, 0))
    init(deadline: UInt64) { self.deadline = deadline }
    var count: Int { state.withLock { $0.count } }
    /// Counts one completion; true if another request should be sent.
    func tick() -> Bool {
        state.withLock { $0.count += 1 }
        return ferry_monotonic_ns() < deadline
    }
    func makeFinish(inFlight: Int, _ done: CheckedContinuation<Void, Never>) -> @Sendable () -> Void {
        state.withLock { $0.outstanding = inFlight }
        return { [self] in
            let last = state.withLock { s -> Bool in s.outstanding -= 1; return s.outstanding == 0 }
            if last { done.resume() }
        }
    }
}

/// Optionally writes what a read callback has queued every `every` bytes (the policy
/// `BLIPConnection` uses), so the raw rows can be measured with and without it.
struct MidReadFlusher {
    let every: Int
    private var flushedAt = 0
    init(every: Int) { self.every = every }
    mutating func afterSend(_ c: WebSocketConnection) {
        guard every > 0 else { return }
        let queued = c.bufferedByteCount
        if queued >= flushedAt + every { c.tcp.flush(); flushedAt = c.bufferedByteCount } else if queued < flushedAt { flushedAt = queued }
    }
}

/// Echoes at loop level.
final class Echo: WebSocketHandler {
    var flusher: MidReadFlusher
    init(flushEvery: Int) { flusher = MidReadFlusher(every: flushEvery) }
    func webSocket(_ c: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        c.send(kind, payload)
        flusher.afterSend(c)
    }
    func webSocketDidClose(_ c: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {}
}

/// A loop-level WebSocket client that keeps N messages in flight and counts echoes.
///
/// Safety of `@unchecked Sendable`: `connection` and `onMessage` are used on the client loop only.
final class WebSocketDriver: WebSocketHandler, @unchecked Sendable {
    var connection: WebSocketConnection?
    var onMessage: ((Int) -> Void)?
    var flusher = MidReadFlusher(every: 0)

    static func connect(port: Int, loop: EventLoop, configuration: WebSocketConfiguration) async throws -> WebSocketDriver {
        let driver = WebSocketDriver()
        let url = try WebSocketURL("ws://127.0.0.1:\(port)/")
        let r: Result<WebSocketConnection, WebSocketError> = await withCheckedContinuation { c in
            ClientConnector.connect(to: url, on: loop, configuration: configuration, handler: driver) { c.resume(returning: $0) }
        }
        driver.connection = try r.get()
        return driver
    }

    func webSocket(_ c: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        onMessage?(payload.count)
        flusher.afterSend(c)
    }
    func webSocketDidClose(_ c: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {}

    func rate(payload: [UInt8], inFlight: Int, seconds: Double) async throws -> Double {
        guard let conn = connection else { return 0 }
        let counter = RateCounter(deadline: ferry_monotonic_ns() + UInt64(seconds * 1e9))
        let start = ferry_monotonic_ns()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finish = counter.makeFinish(inFlight: inFlight, done)
            conn.loop.execute {
                self.onMessage = { _ in if counter.tick() { conn.send(.binary, payload) } else { finish() } }
                for _ in 0..<inFlight { conn.send(.binary, payload) }
            }
        }
        return Double(counter.count) / (Double(ferry_monotonic_ns() - start) / 1e9)
    }

    func throughput(payload: [UInt8]) async throws -> Double {
        guard let conn = connection else { return 0 }
        let start = ferry_monotonic_ns()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            conn.loop.execute {
                self.onMessage = { _ in done.resume() }
                conn.send(.binary, payload)
            }
        }
        return Double(2 * payload.count) / 1e6 / (Double(ferry_monotonic_ns() - start) / 1e9)
    }
}

func fmt(_ v: Double) -> String { v >= 1000 ? String(format: "%.0f", v) : String(format: "%.1f", v) }

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

func peakRSSMiB() -> Int {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Int(u.ru_maxrss / 1024)
}

func noise(_ n: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: n) { b, c in
        var x: UInt32 = 12_345
        for i in 0..<n { x = x &* 1_103_515_245 &+ 12_345; b[i] = UInt8(truncatingIfNeeded: x >> 16) }
        c = n
    }
}

func jsonLike(_ n: Int) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(n + 64)
    var i = 0
    while out.count < n {
        out.append(contentsOf: "{\"_id\":\"doc-\(i)\",\"_rev\":\"1-\(i &* 7919 % 100_000)\",\"type\":\"item\",\"n\":\(i % 97)},".utf8)
        i += 1
    }
    return Array(out.prefix(n))
}
