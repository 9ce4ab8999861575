import ArgumentParser
import FerryNet
import FerryWebSocket
import Foundation

/// Runs the standard Autobahn|Testsuite client loop with Ferry's client: getCaseCount, then
/// runCase for each case (echoing every message), then updateReports.
struct AutobahnClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "autobahn-client",
                                                    abstract: "Run the Autobahn|Testsuite client protocol against a fuzzingserver.")

    @Option(help: "The fuzzingserver URL (default: $AUTOBAHN_URL or ws://127.0.0.1:9001).")
    var url: String?

    @Option(help: "Agent name in the reports (default: $AUTOBAHN_AGENT or ferry).")
    var agent: String?

    @Flag(help: "Offer permessage-deflate (RFC 7692) in every case's handshake (12.*, 13.* need it).")
    var deflate = false

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let env = ProcessInfo.processInfo.environment
        let base = url ?? env["AUTOBAHN_URL"] ?? "ws://127.0.0.1:9001"
        let agentName = agent ?? env["AUTOBAHN_AGENT"] ?? "ferry"
        let group = try EventLoopGroup(loopCount: 1, name: "autobahn")
        let count = try await caseCount(base, group)
        print("autobahn: \(count) cases")
        var config = WebSocketConfiguration()
        if deflate { config.permessageDeflate = PerMessageDeflateOptions() }
        for i in 1...max(count, 1) where count > 0 {
            await runCase(url: "\(base)/runCase?case=\(i)&agent=\(agentName)", configuration: config, group: group)
        }
        let ws = try await WebSocket.connect(to: "\(base)/updateReports?agent=\(agentName)", group: group)
        for try await _ in ws.messages {}
        print("autobahn: reports updated")
        group.shutdown()
    }

    private func caseCount(_ base: String, _ group: EventLoopGroup) async throws -> Int {
        let ws = try await WebSocket.connect(to: "\(base)/getCaseCount", group: group)
        var n = 0
        for try await m in ws.messages {
            if case .text(let s) = m { n = Int(s) ?? 0 }
        }
        return n
    }

    /// One case: echo on the loop thread until the server closes. Errors end the case only.
    private func runCase(url: String, configuration: WebSocketConfiguration, group: EventLoopGroup) async {
        guard let parsed = try? WebSocketURL(url) else { return }
        let done = AsyncStream<Void>.makeStream()
        let handler = CaseEcho { done.continuation.finish() }
        let connected: Bool = await withCheckedContinuation { c in
            ClientConnector.connect(to: parsed, on: group.next(), configuration: configuration, handler: handler) { r in
                if case .failure = r { c.resume(returning: false) } else { c.resume(returning: true) }
            }
        }
        guard connected else { return }
        for await _ in done.stream {}
    }
}

private final class CaseEcho: WebSocketHandler {
    let onClose: @Sendable () -> Void
    init(onClose: @escaping @Sendable () -> Void) { self.onClose = onClose }
    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        connection.send(kind, payload)
    }
    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {
        onClose()
    }
}
