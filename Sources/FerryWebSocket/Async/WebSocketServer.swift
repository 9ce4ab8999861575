import FerryNet
import Logging

/// A server's answer to an upgrade request in the async API.
public enum UpgradeResponse: Sendable {
    /// Accept with this subprotocol (nil: none) and extra response headers.
    case accept(subprotocol: String?, headers: HTTPHeaders = HTTPHeaders())
    /// Refuse with an HTTP status and a plain-text message.
    case refuse(status: Int, message: String, headers: HTTPHeaders = HTTPHeaders())
}

/// A WebSocket server for async/await code: each accepted connection arrives on
/// `connections` as a `WebSocket`. The upgrade hook sees every request (path, headers,
/// offered subprotocols) and accepts or refuses it; it runs on an event loop, so it must not block.
public final class WebSocketServer: Sendable {
    private let listener: WebSocketListener
    /// The accepted connections, in order of arrival.
    public let connections: AsyncStream<WebSocket>
    private let continuation: AsyncStream<WebSocket>.Continuation
    /// The port bound.
    public var port: Int { listener.port }
    /// The address bound.
    public var boundAddress: SocketAddress { listener.boundAddress }
    /// Connections handshaking or open.
    public var connectionCount: Int { listener.connectionCount }

    private init(listener: WebSocketListener, connections: AsyncStream<WebSocket>, continuation: AsyncStream<WebSocket>.Continuation) {
        self.listener = listener
        self.connections = connections
        self.continuation = continuation
    }

    /// Binds `host`:`port` (0 picks a free port). By default every upgrade is accepted with
    /// the first client-offered subprotocol found in `configuration.subprotocols`.
    public static func bind(host: String = "127.0.0.1", port: Int = 0,
                            configuration: WebSocketConfiguration = WebSocketConfiguration(),
                            tls: TLSContext? = nil,
                            group: EventLoopGroup = .shared,
                            logger: Logger = Logger(label: "ferry.websocket"),
                            upgrade: (@Sendable (UpgradeRequest) -> UpgradeResponse)? = nil) async throws(WebSocketError) -> WebSocketServer {
        let (stream, cont) = AsyncStream<WebSocket>.makeStream()
        let supported = configuration.subprotocols
        let decide = upgrade ?? { .accept(subprotocol: $0.negotiateSubprotocol(supported)) }
        let listener: WebSocketListener
        do {
            listener = try await WebSocketListener.bind(host: host, port: port, group: group,
                                                        configuration: configuration, tls: tls, logger: logger) { request, _ in
                switch decide(request) {
                case let .refuse(status, message, headers):
                    return .refuse(status: status, message: message, headers: headers)
                case let .accept(subprotocol, headers):
                    let bridge = AsyncBridge(limit: configuration.inboundBufferLimit)
                    bridge.onOpen = { conn in cont.yield(WebSocket(connection: conn, bridge: bridge)) }
                    return .accept(subprotocol: subprotocol, headers: headers, handler: bridge)
                }
            }
        } catch {
            throw .transport(error)
        }
        return WebSocketServer(listener: listener, connections: stream, continuation: cont)
    }

    /// Stops accepting; ends `connections`. Open connections stay open.
    public func close() async {
        await listener.close()
        continuation.finish()
    }
}
