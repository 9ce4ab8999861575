import FerryNet

/// A WebSocket connection for async/await code: an `AsyncSequence` of inbound messages (one
/// reader), `send` that suspends while the peer is not reading, `ping` that waits for its pong,
/// and `close` that completes the close handshake.
public final class WebSocket: Sendable {
    private let connection: WebSocketConnection
    private let bridge: AsyncBridge
    /// The subprotocol negotiated in the handshake, if any.
    public let subprotocol: String?
    /// The upgrade request (server side only).
    public let request: HTTPRequestHead?
    /// The peer's TLS certificate (see `WebSocketConnection.peerCertificate`).
    public let peerCertificate: TLSCertificate?
    /// permessage-deflate as negotiated in the handshake; nil when not in use.
    public let permessageDeflate: PerMessageDeflateAgreement?
    /// The peer's address.
    public var remoteAddress: SocketAddress? { connection.tcp.remoteAddress }

    init(connection: WebSocketConnection, bridge: AsyncBridge) {
        self.connection = connection
        self.bridge = bridge
        subprotocol = connection.subprotocol
        request = connection.request
        peerCertificate = connection.peerCertificate
        permessageDeflate = connection.permessageDeflate
        bridge.connectionForOtherThreads = connection
    }

    /// Opens a client connection to a `ws://` or `wss://` URL. TLS uses `tls` (make one
    /// `TLSContext(client:)` and reuse it), or the system trust store with host-name checks.
    public static func connect(to url: String, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                               tls: TLSContext? = nil,
                               group: EventLoopGroup = .shared) async throws(WebSocketError) -> WebSocket {
        let parsed = try WebSocketURL(url)
        let bridge = AsyncBridge(limit: configuration.inboundBufferLimit)
        let loop = group.next()
        let result: Result<WebSocketConnection, WebSocketError> = await withCheckedContinuation { c in
            ClientConnector.connect(to: parsed, on: loop, configuration: configuration, tls: tls, handler: bridge) { c.resume(returning: $0) }
        }
        return WebSocket(connection: try result.get(), bridge: bridge)
    }

    /// Inbound messages in order. Iteration ends after a clean close and throws the
    /// `WebSocketError` of an abnormal one. One reader at a time.
    public var messages: Messages { Messages(bridge: bridge) }

    /// The inbound message stream of a `WebSocket`.
    public struct Messages: AsyncSequence, Sendable {
        public typealias Element = WebSocketMessage
        let bridge: AsyncBridge

        /// The iterator; `next()` suspends until a message or the end.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let bridge: AsyncBridge
            public mutating func next() async throws -> WebSocketMessage? { try await bridge.next() }
        }

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bridge: bridge) }
    }

    /// Receives the next message, nil after a clean close.
    public func receive() async throws -> WebSocketMessage? { try await bridge.next() }

    /// Sends a message; suspends while the output queue is above its high watermark. With
    /// `fragmentSize`, the message goes out as fragments of at most that many bytes.
    public func send(_ message: WebSocketMessage, fragmentSize: Int? = nil) async throws(WebSocketError) {
        let conn = connection
        let bridge = self.bridge
        do {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
                let accepted = conn.loop.execute {
                    guard conn.isOpen else {
                        c.resume(throwing: WebSocketError.closed(code: .abnormalClosure, reason: "connection is closed"))
                        return
                    }
                    let bytes = message.bytes
                    if let size = fragmentSize, size > 0, bytes.count > size {
                        bytes.withUnsafeBytes { raw in
                            var offset = 0
                            while offset < raw.count {
                                let end = min(offset + size, raw.count)
                                conn.sendFragment(message.kind, UnsafeRawBufferPointer(rebasing: raw[offset..<end]), fin: end == raw.count)
                                offset = end
                            }
                        }
                    } else {
                        conn.send(message.kind, bytes)
                    }
                    if conn.isWritable { c.resume() } else { bridge.parkWriter(c) }
                }
                if !accepted { c.resume(throwing: WebSocketError.transport(.loopShutDown)) }
            }
        } catch let e as WebSocketError { throw e } catch { throw .transport(.closed) }
    }

    /// Sends a text message.
    public func send(text: String) async throws(WebSocketError) { try await send(.text(text)) }

    /// Sends a binary message.
    public func send(binary: [UInt8]) async throws(WebSocketError) { try await send(.binary(binary)) }

    /// Sends a ping and waits for its pong.
    public func ping(_ payload: [UInt8] = []) async throws(WebSocketError) {
        let conn = connection
        let result: WebSocketError? = await withCheckedContinuation { c in
            let accepted = conn.loop.execute { conn.ping(payload) { c.resume(returning: $0) } }
            if !accepted { c.resume(returning: .transport(.loopShutDown)) }
        }
        if let result { throw result }
    }

    /// How a connection ended.
    public struct CloseInfo: Sendable, Equatable {
        /// The peer's close code (1005 if none was given, 1006 if the connection dropped).
        public var code: CloseCode
        /// The peer's reason.
        public var reason: String
        /// Set when the connection failed rather than closing cleanly.
        public var error: WebSocketError?
    }

    /// Starts the close handshake (if not already closing) and waits for it to finish.
    @discardableResult
    public func close(code: CloseCode = .normalClosure, reason: String = "") async -> CloseInfo {
        let conn = connection
        conn.loop.execute { conn.close(code: code, reason: reason) }
        return await closed()
    }

    /// Waits until the connection is closed, by either side.
    public func closed() async -> CloseInfo {
        let c = await bridge.waitForClose()
        return CloseInfo(code: c.code, reason: c.reason, error: c.error)
    }

    /// Drops the TCP connection without a close handshake (for tests of abnormal closure).
    public func abort() {
        let conn = connection
        conn.loop.execute { conn.abort(.closed(code: .abnormalClosure, reason: "aborted")) }
    }
}
