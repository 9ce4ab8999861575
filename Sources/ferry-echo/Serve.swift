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

    @Option(help: "Serve wss://: the certificate chain (PEM, leaf first). Needs --tls-key.")
    var tlsCert: String?

    @Option(help: "The private key of --tls-cert (PEM, unencrypted).")
    var tlsKey: String?

    @Option(help: "Require client certificates issued by these authorities (PEM bundle): mutual TLS.")
    var clientCa: String?

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if clientCa != nil && tlsCert == nil { throw ValidationError("--client-ca needs --tls-cert and --tls-key") }
    }

    /// The TLS server context the options ask for, if any.
    func tlsContext() throws -> TLSContext? {
        guard let tlsCert, let tlsKey else { return nil }
        var tls = TLSServerConfiguration(certificateChain: .file(tlsCert), privateKey: .file(tlsKey))
        if let clientCa { tls.clientAuthentication = .required(trusting: .file(clientCa)) }
        return try TLSContext(server: tls)
    }

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
        let tls = try tlsContext()
        let listener = try await WebSocketListener.bind(host: host, port: port, group: group,
                                                        configuration: config, tls: tls, logger: logger) { request, _ in
            .accept(subprotocol: request.negotiateSubprotocol(supported), handler: EchoHandler())
        }
        print("ferry-echo listening on \(tls == nil ? "ws" : "wss")://\(listener.boundAddress)/")
        fflush(nil)
        await waitForTerminationSignal()
        await listener.close()
        group.shutdown()
    }
}
