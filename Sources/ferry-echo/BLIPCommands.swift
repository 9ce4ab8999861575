import ArgumentParser
import FerryBLIP
import FerryNet
import FerryWebSocket
import Foundation
import Synchronization

/// `ferry-echo blip-serve`: answers every BLIP request by echoing its properties and body
/// (compressed when the request was; responses are urgent when the request was).
struct BLIPServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "blip-serve", abstract: "Run a BLIP echo server.")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind; 0 picks a free one (printed on start).") var port = 9002
    @Option(help: "The app protocol id: the server speaks BLIP_3+<app>.") var app = "FerryEcho"
    @Option(help: "Serve only this path (default: any).") var path: String?
    @Option(name: .customLong("max-message-mib"), help: "The largest message accepted, in MiB.") var maxMessageMiB = 64

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let group = try EventLoopGroup(loopCount: 1, name: "blip-echo")
        var config = BLIPConfiguration()
        config.maxMessageSize = maxMessageMiB << 20
        let listener = try await BLIPConnection.listen(host: host, port: port, path: path, app: app,
                                                       configuration: config, group: group) { conn in
            conn.registerDefault { req in
                guard !req.message.isNoReply else { return }
                req.respond(properties: req.message.properties, body: req.message.body, compressed: req.message.isCompressed)
            }
        }
        print("ferry-echo BLIP_3+\(app) listening on ws://\(listener.boundAddress)\(path ?? "/")")
        fflush(nil)
        await waitForTerminationSignal()
        await listener.close()
        group.shutdown()
    }
}

/// `ferry-echo blip-client`: sends a mixed workload (each size compressed and not, some urgent,
/// some NoReply) at once and checks every echo.
struct BLIPClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "blip-client", abstract: "Check a BLIP echo server with a mixed workload.")

    @Option(help: "The server URL, e.g. ws://127.0.0.1:9002/blip.") var url: String
    @Option(help: "The app protocol id (BLIP_3+<app>).") var app = "FerryEcho"
    @Option(help: "Requests to send.") var count = 1000
    @Option(help: "Body sizes, comma-separated, used in turn.") var sizes = "0,100,65536,1048576"
    @Option(help: "Requests in flight at once.") var parallel = 64
    @Option(name: .customLong("max-message-mib"), help: "The largest message accepted, in MiB.") var maxMessageMiB = 64
    @Flag(name: .customLong("report-memory"), help: "Print peak resident memory (VmHWM) after connecting and at the end.")
    var reportMemory = false

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let sizeList = sizes.split(separator: ",").compactMap { Int($0) }
        guard !sizeList.isEmpty else { throw ValidationError("--sizes needs at least one size") }
        var config = BLIPConfiguration()
        config.maxMessageSize = maxMessageMiB << 20
        let conn = try await BLIPConnection.connect(to: url, app: app, configuration: config)
        if reportMemory { print("VmHWM at start: \(peakResidentKiB()) kB") }
        let tally = Tally()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            var inFlight = 0
            for i in 0..<count {
                if inFlight >= parallel { try await tasks.next(); inFlight -= 1 }
                inFlight += 1
                let parameters = (sizeList, conn, tally)
                tasks.addTask {
                    let (sizeList, conn, tally) = parameters
                    let size = sizeList[i % sizeList.count]
                    let compressed = (i / sizeList.count) % 2 == 1
                    let urgent = i % 5 == 0
                    let noReply = i % 7 == 3
                    var body = [UInt8](repeating: 0, count: size)
                    var x = UInt32(i) &* 2_654_435_761 | 1
                    for j in 0..<size {
                        x = x &* 1_103_515_245 &+ 12_345
                        body[j] = compressed ? UInt8(97 + (x >> 16) % 4) : UInt8(truncatingIfNeeded: x >> 16)
                    }
                    let req = BLIPMessage.request(profile: "echo", properties: [("i", String(i))], body: body,
                                                  urgent: urgent, compressed: compressed, noReply: noReply)
                    do {
                        let reply = try await conn.send(req)
                        // memcmp: a debug build's generic `==` takes seconds over 100 MiB.
                        let same = reply.body.count == body.count && reply.body.withUnsafeBytes { a in
                            body.withUnsafeBytes { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
                        }
                        if noReply || (same && reply.properties["i"] == String(i) && reply.isUrgent == urgent) {
                            tally.passed.wrappingAdd(1, ordering: .relaxed)
                        } else {
                            tally.failures.withLock { $0.append("#\(i) size \(size): echo differs") }
                        }
                    } catch {
                        tally.failures.withLock { $0.append("#\(i) size \(size): \(error)") }
                    }
                }
            }
            try await tasks.waitForAll()
        }
        await conn.close()
        if reportMemory { print("VmHWM at end: \(peakResidentKiB()) kB") }
        let failed = tally.failures.withLock { $0 }
        for f in failed.prefix(20) { print("FAIL \(f)") }
        print("\(tally.passed.load(ordering: .relaxed)) passed, \(failed.count) failed")
        if !failed.isEmpty { throw ExitCode(1) }
    }
}

/// Counts a client run's outcomes across tasks.
final class Tally: Sendable {
    let failures = Mutex<[String]>([])
    let passed = Atomic<Int>(0)
}

/// This process's peak resident set (VmHWM in /proc/self/status), in KiB; 0 if unreadable.
func peakResidentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}
