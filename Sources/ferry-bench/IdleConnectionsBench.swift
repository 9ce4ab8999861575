import ArgumentParser
import FerryNet
import FerryWebSocket
import Foundation

/// `ferry-bench idle`: opens many WebSocket connections to a server and leaves them idle, then
/// reports how much the server's resident memory grew per connection (VmRSS of `--server-pid`).
struct IdleConnectionsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "idle",
        abstract: "Server memory per idle WebSocket connection (opens --count connections, reads the server's VmRSS).")

    @Option(help: "Server URL (ws://).") var url = "ws://127.0.0.1:9001/"
    @Option(help: "Connections to open.") var count = 10_000
    @Option(help: "The server's process id (its /proc/PID/status is read).") var serverPid: Int32

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = max(limit.rlim_cur, min(limit.rlim_max, rlim_t(count + 1024)))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let group = try EventLoopGroup(loopCount: 1, name: "idle-bench")
        let parsed = try WebSocketURL(url)
        let before = Self.residentKiB(serverPid)
        var open: [WebSocketConnection] = []
        let handler = IdleHandler()
        for i in 0..<count {
            let result: Result<WebSocketConnection, WebSocketError> = await withCheckedContinuation { c in
                ClientConnector.connect(to: parsed, on: group.loops[0], handler: handler) { c.resume(returning: $0) }
            }
            do { open.append(try result.get()) } catch {
                print("connection \(i) failed: \(error)")
                break
            }
        }
        // Each connect completed on the server's 101, so the server holds every connection now.
        let after = Self.residentKiB(serverPid)
        let n = open.count
        print("ferry-bench idle: \(n) idle connections")
        print("  server VmRSS: \(before) kB before, \(after) kB after")
        print(String(format: "  %.2f KiB per idle connection", Double(after - before) / Double(max(n, 1))))
        group.shutdown()
    }

    static func residentKiB(_ pid: Int32) -> Int {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}

/// Ignores everything: the connections only sit there.
final class IdleHandler: WebSocketHandler {
    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {}
    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {}
}
