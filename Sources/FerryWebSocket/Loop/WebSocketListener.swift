import FerryNet
import Logging
import Synchronization

/// A WebSocket server at loop level: accepts TCP connections, runs the upgrade (with the
/// handshake timeout, header limit and connection limit of its configuration) and asks the
/// upgrade hook, on the connection's loop, whether and how to accept.
public final class WebSocketListener: Sendable {
    /// Decides each upgrade; runs on the new connection's loop thread.
    public typealias UpgradeHook = @Sendable (UpgradeRequest, EventLoop) -> UpgradeDecision
    /// Takes every accepted connection from its first byte (an HTTP server sharing the port,
    /// such as a REST API): it reads the requests, and hands one that asks for a WebSocket
    /// back with `upgrade(_:request:rest:)`. Runs on the connection's loop thread.
    public typealias PlainHTTPHandler = @Sendable (HandedOffConnection) -> Void

    private let tcp: TCPListener
    private let admission: ConnectionAdmission
    /// The address bound (with the real port when 0 was asked for).
    public var boundAddress: SocketAddress { tcp.boundAddress }
    /// The port bound.
    public var port: Int { tcp.boundAddress.port }
    /// Connections currently handshaking or open.
    public var connectionCount: Int { admission.openCount }

    private let configuration: WebSocketConfiguration
    private let logger: Logger
    private let hook: UpgradeHook

    private init(tcp: TCPListener, admission: ConnectionAdmission, configuration: WebSocketConfiguration, logger: Logger, hook: @escaping UpgradeHook) {
        self.tcp = tcp
        self.admission = admission
        self.configuration = configuration
        self.logger = logger
        self.hook = hook
    }

    /// Binds `host`:`port` (0 = any free port) and starts serving on `group`'s loops; with
    /// `tls` (a server context) it serves `wss://`, and the upgrade hook sees the client's
    /// certificate when mutual TLS is on. The TLS handshake counts against the handshake timeout.
    /// With `plainHTTP`, every connection goes to that HTTP server first, which upgrades the
    /// ones that ask (one port for WebSockets and plain HTTP, each request parsed once);
    /// without it, the listener reads the upgrade request itself.
    public static func bind(host: String, port: Int, group: EventLoopGroup,
                            configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            tls: TLSContext? = nil,
                            logger: Logger = Logger(label: "ferry.websocket"),
                            plainHTTP: PlainHTTPHandler? = nil,
                            upgrade: @escaping UpgradeHook) async throws(NetError) -> WebSocketListener {
        let admission = ConnectionAdmission(maxConnections: configuration.maxConnections,
                                            maxPerAddress: configuration.maxConnectionsPerAddress, logger: logger)
        var options = ConnectionOptions()
        options.writeHighWaterMark = configuration.writeHighWaterMark
        options.writeLowWaterMark = configuration.writeHighWaterMark / 4
        let listener = try await TCPListener.bind(host: host, port: port, group: group, options: options, tls: tls) { tcp in
            let release: () -> Void
            switch admission.admit(tcp.remoteAddress) {
            case .success(let r): release = r
            case .failure(let refusal):
                // Existing connections keep working; this one hears why and goes.
                Refuser.refuse(tcp, Handshake.errorResponse(status: 503, message: refusal == .total ? "too many connections" : "too many connections from your address",
                                                            headers: HTTPHeaders([("Retry-After", "1")])))
                return
            }
            if let plainHTTP {
                plainHTTP(HandedOffConnection(tcp: tcp, finished: release))
                return
            }
            let loop = tcp.loop
            let upgrader = ServerUpgrader(configuration: configuration, logger: logger,
                                          hook: { upgrade($0, loop) }, onFinish: release)
            upgrader.start(tcp)
        }
        return WebSocketListener(tcp: listener, admission: admission, configuration: configuration, logger: logger, hook: upgrade)
    }

    /// Runs the WebSocket upgrade on a connection `plainHTTP` took, once a request on it asks
    /// for one: `request` as that server parsed it, `rest` what the client sent after it. The
    /// handshake is checked here (a bad one is refused with its status); the hook decides.
    /// Call on the connection's loop.
    public func upgrade(_ connection: HandedOffConnection, request: HTTPRequestHead, rest: [UInt8]) {
        let loop = connection.tcp.loop
        let hook = self.hook
        let upgrader = ServerUpgrader(configuration: configuration, logger: logger,
                                      hook: { hook($0, loop) }, onFinish: connection.finished)
        upgrader.adopt(connection.tcp, request: request, rest: rest)
    }

    /// Stops accepting new connections; open ones are not touched.
    public func close() async { await tcp.close() }
}

/// Answers a connection refused before its handshake, then closes it the way RFC 9112 §9.6
/// asks of a server that has not read the request: the sending side is shut first and what
/// the client sends is read and dropped until it closes (or two seconds pass), so the close
/// does not turn into a reset that destroys the answer before the client reads it.
private final class Refuser: ConnectionHandler {
    static func refuse(_ tcp: TCPConnection, _ answer: [UInt8]) {
        tcp.start(handler: Refuser())
        tcp.write(answer)
        tcp.shutdownOutput()
        _ = tcp.loop.schedule(after: 2) { if !tcp.isClosed { tcp.abort() } }
    }

    func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {}
    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) { connection.close() }
    func connectionClosed(_ connection: TCPConnection, error: NetError?) {}
}

/// A connection the WebSocket listener handed to another protocol's handler (see
/// `WebSocketListener.PlainHTTPHandler`). Use it only on its connection's loop.
public struct HandedOffConnection {
    /// The connection, not started yet: its new owner calls `start(handler:)` on it.
    public let tcp: TCPConnection
    /// Call exactly once when the connection closes (it frees the listener's connection slot).
    public let finished: () -> Void
}
