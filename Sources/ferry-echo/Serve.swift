import ArgumentParser
import FerryNet
import FerryWebSocket
import Foundation
import Logging

/// Echoes every text and binary message back on the loop thread that received it.
final class EchoHandler: WebSocketHandler {
    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        connection.send(kind, payload)
    }
    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {}
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run a WebSocket echo server.")

    @Option(help: "Address to bind (numeric IPv4 or IPv6, or a host name).")
    var host = "127.0.0.1"

    @Option(help: "Port to bind; 0 picks a free one (printed on start).")
    var port = 9001

    @Option(help: "Event-loop threads (default: one per core).")
    var loops: Int = EventLoopGroup.coreCount

    @Option(help: "Largest message accepted, in bytes.")
    var maxMessageSize = 16 << 20

    @Option(help: "Subprotocols supported, comma-separated, in preference order.")
    var subprotocols = ""

    @Option(help: "Log level (trace, debug, info, warning, error).")
    var logLevel = "info"

    @Flag(help: "Accept permessage-deflate (RFC 7692) offers (default: decline them).")
    var deflate = false

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = Logger.Level(rawValue: logLevel) ?? .info
            return h
        }
        let logger = Logger(label: "ferry.echo")
        signal(SIGPIPE, SIG_IGN)
        let group = try EventLoopGroup(loopCount: loops, name: "echo")
        var config = WebSocketConfiguration()
        config.maxMessageSize = maxMessageSize
        config.maxFrameSize = maxMessageSize
        config.subprotocols = subprotocols.split(separator: ",").map(String.init)
        if deflate { config.permessageDeflate = PerMessageDeflateOptions() }
        let supported = config.subprotocols
        let listener = try await WebSocketListener.bind(host: host, port: port, group: group,
                                                        configuration: config, logger: logger) { request, _ in
            .accept(subprotocol: request.negotiateSubprotocol(supported), handler: EchoHandler())
        }
        print("ferry-echo listening on ws://\(listener.boundAddress)/")
        fflush(nil)
        await waitForTerminationSignal()
        await listener.close()
        group.shutdown()
    }
}
