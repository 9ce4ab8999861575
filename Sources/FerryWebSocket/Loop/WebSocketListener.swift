import FerryNet
import Logging
import Synchronization

/// A WebSocket server at loop level: accepts TCP connections, runs the upgrade (with the
/// handshake timeout, header limit and connection limit of its configuration) and asks the
/// upgrade hook, on the connection's loop, whether and how to accept.
public final class WebSocketListener: Sendable {
    /// Decides each upgrade; runs on the new connection's loop thread.
    public typealias UpgradeHook = @Sendable (UpgradeRequest, EventLoop) -> UpgradeDecision
    /// Takes a connection whose first request is not an upgrade (another protocol sharing the
    /// port, such as a REST API); runs on the connection's loop thread.
    public typealias PlainHTTPHandler = @Sendable (HandedOffConnection) -> Void

    private let tcp: TCPListener
    private let openConnections: Counter
    /// The address bound (with the real port when 0 was asked for).
    public var boundAddress: SocketAddress { tcp.boundAddress }
    /// The port bound.
    public var port: Int { tcp.boundAddress.port }
    /// Connections currently handshaking or open.
    public var connectionCount: Int { openConnections.value.load(ordering: .relaxed) }

    final class Counter: Sendable { let value = Atomic<Int>(0) }

    private let configuration: WebSocketConfiguration
    private let logger: Logger
    private let hook: UpgradeHook

    private init(tcp: TCPListener, counter: Counter, configuration: WebSocketConfiguration, logger: Logger, hook: @escaping UpgradeHook) {
        self.tcp = tcp
        openConnections = counter
        self.configuration = configuration
        self.logger = logger
        self.hook = hook
    }

    /// Binds `host`:`port` (0 = any free port) and starts serving on `group`'s loops; with
    /// `tls` (a server context) it serves `wss://`, and the upgrade hook sees the client's
    /// certificate when mutual TLS is on. The TLS handshake counts against the handshake timeout.
    /// With `plainHTTP`, a connection whose first request has no `Upgrade` field goes to it
    /// instead of being refused (one port for WebSockets and plain HTTP).
    public static func bind(host: String, port: Int, group: EventLoopGroup,
                            configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            tls: TLSContext? = nil,
                            logger: Logger = Logger(label: "ferry.websocket"),
                            plainHTTP: PlainHTTPHandler? = nil,
                            upgrade: @escaping UpgradeHook) async throws(NetError) -> WebSocketListener {
        let counter = Counter()
        var options = ConnectionOptions()
        options.writeHighWaterMark = configuration.writeHighWaterMark
        options.writeLowWaterMark = configuration.writeHighWaterMark / 4
        let listener = try await TCPListener.bind(host: host, port: port, group: group, options: options, tls: tls) { tcp in
            let n = counter.value.wrappingAdd(1, ordering: .relaxed).newValue
            let release: () -> Void = { counter.value.wrappingSubtract(1, ordering: .relaxed) }
            if n > configuration.maxConnections {
                logger.warning("connection limit reached", metadata: ["limit": "\(configuration.maxConnections)"])
                let refuser = Refuser(onFinish: release)
                tcp.start(handler: refuser)
                tcp.write(Handshake.errorResponse(status: 503, message: "too many connections",
                                                  headers: HTTPHeaders([("Retry-After", "1")])))
                tcp.close()
                return
            }
            let loop = tcp.loop
            let upgrader = ServerUpgrader(configuration: configuration, logger: logger, plainHTTP: plainHTTP,
                                          hook: { upgrade($0, loop) }, onFinish: release)
            upgrader.start(tcp)
        }
        return WebSocketListener(tcp: listener, counter: counter, configuration: configuration, logger: logger, hook: upgrade)
    }

    /// Runs the WebSocket upgrade on a connection that `plainHTTP` took, when a later request
    /// on it asks for an upgrade: `bytes` start at that request. Call on the connection's loop.
    public func upgrade(_ connection: HandedOffConnection, bytes: [UInt8]) {
        let loop = connection.tcp.loop
        let hook = self.hook
        let upgrader = ServerUpgrader(configuration: configuration, logger: logger,
                                      hook: { hook($0, loop) }, onFinish: connection.finished)
        upgrader.adopt(connection.tcp, bytes: bytes)
    }

    /// Stops accepting new connections; open ones are not touched.
    public func close() async { await tcp.close() }
}

/// Drains and discards input on a connection that was refused before its handshake.
private final class Refuser: ConnectionHandler {
    let onFinish: () -> Void
    init(onFinish: @escaping () -> Void) { self.onFinish = onFinish }
    func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {}
    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) {}
    func connectionClosed(_ connection: TCPConnection, error: NetError?) { onFinish() }
}

/// A connection the WebSocket listener handed to another protocol's handler (see
/// `WebSocketListener.PlainHTTPHandler`). Use it only on its connection's loop.
public struct HandedOffConnection {
    /// The connection; its new owner calls `replaceHandler` on it.
    public let tcp: TCPConnection
    /// What was read so far, from the first byte of the request on.
    public let bytes: [UInt8]
    /// Call exactly once when the connection closes (it frees the listener's connection slot).
    public let finished: () -> Void
}
