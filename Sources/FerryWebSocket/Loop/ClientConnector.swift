import FerryHTTP
import FerryNet

/// Opens client WebSocket connections at loop level: TCP connect, upgrade request, response
/// checks (status, `Sec-WebSocket-Accept`, subprotocol), all within the handshake timeout.
public enum ClientConnector {
    /// Connects to `url`; on success the connection is open and `handler` receives its events
    /// (its `webSocketDidOpen` runs before `completion`). `completion` runs on the loop.
    /// A `wss://` URL runs TLS with `tls` (a client context), or with the system trust store
    /// and host-name checks when it is nil; the TLS handshake counts against the handshake
    /// timeout.
    public static func connect(to url: WebSocketURL, on loop: EventLoop,
                               configuration: WebSocketConfiguration = WebSocketConfiguration(),
                               tls: TLSContext? = nil,
                               handler: WebSocketHandler,
                               completion: @escaping @Sendable (Result<WebSocketConnection, WebSocketError>) -> Void) {
        // The handler is used on `loop` only; the box carries it there (confinement).
        let box = UncheckedTransfer(handler)
        Task {
            let context: TLSContext?
            let chosen: Result<TLSContext?, TLSError> = !url.secure ? .success(nil) : tls.map { .success($0) } ?? TLSContext.defaultClientResult
            switch chosen {
            case .success(let c): context = c
            case .failure(let error):
                _ = loop.execute { completion(.failure(.transport(.tls(error)))) }
                return
            }
            let addresses: [SocketAddress]
            do throws(NetError) { addresses = try await Resolver.resolve(host: url.host, port: url.port) } catch {
                loop.execute { completion(.failure(.transport(error))) }
                return
            }
            loop.execute {
                attempt(addresses[...], url: url, loop: loop, configuration: configuration, tls: context,
                        handler: box.value, lastError: .transport(.connectionRefused), completion: completion)
            }
        }
    }

    private static func attempt(_ addresses: ArraySlice<SocketAddress>, url: WebSocketURL, loop: EventLoop,
                                configuration: WebSocketConfiguration, tls: TLSContext?, handler: WebSocketHandler,
                                lastError: WebSocketError,
                                completion: @escaping @Sendable (Result<WebSocketConnection, WebSocketError>) -> Void) {
        guard let address = addresses.first else { completion(.failure(lastError)); return }
        var options = ConnectionOptions()
        options.writeHighWaterMark = configuration.writeHighWaterMark
        options.writeLowWaterMark = configuration.writeHighWaterMark / 4
        // The connect callback runs on `loop`, where the handler is used (confinement).
        let box = UncheckedTransfer(handler)
        TCPConnection.connect(to: address, on: loop, timeout: configuration.handshakeTimeout, options: options) { result in
            switch result {
            case .failure(let e):
                attempt(addresses.dropFirst(), url: url, loop: loop, configuration: configuration, tls: tls,
                        handler: box.value, lastError: .transport(e), completion: completion)
            case .success(let tcp):
                if let tls {
                    do throws(NetError) { try tcp.startTLS(tls, serverName: url.host) } catch {
                        completion(.failure(.transport(error)))
                        return
                    }
                }
                let upgrader = ClientUpgrader(url: url, configuration: configuration, handler: box.value, completion: completion)
                upgrader.start(tcp)
            }
        }
    }
}

/// Sends the upgrade request and checks the response. Loop-confined.
final class ClientUpgrader: ConnectionHandler {
    private let handshake: ClientHandshake
    private let url: WebSocketURL
    private let configuration: WebSocketConfiguration
    private let handler: WebSocketHandler
    private var completion: (@Sendable (Result<WebSocketConnection, WebSocketError>) -> Void)?
    private var accumulator: HTTPHeadAccumulator
    private var timer: TimerHandle?
    private var failure: WebSocketError?

    init(url: WebSocketURL, configuration: WebSocketConfiguration, handler: WebSocketHandler,
         completion: @escaping @Sendable (Result<WebSocketConnection, WebSocketError>) -> Void) {
        self.url = url
        self.configuration = configuration
        self.handler = handler
        self.completion = completion
        handshake = ClientHandshake(subprotocols: configuration.subprotocols, permessageDeflate: configuration.permessageDeflate)
        accumulator = HTTPHeadAccumulator(maxSize: configuration.maxHeaderSize)
    }

    func start(_ tcp: TCPConnection) {
        tcp.start(handler: self)
        guard !tcp.isClosed else { return }
        // Strong captures (no side tables on the connection's hot objects): the timer is
        // cancelled when the handshake ends either way, which releases them.
        timer = tcp.loop.schedule(after: configuration.handshakeTimeout) { [self, tcp] in
            self.fail(tcp, .timedOut)
        }
        tcp.write(handshake.request(hostHeader: url.hostHeader, target: url.target, headers: configuration.extraHeaders))
    }

    private func fail(_ tcp: TCPConnection, _ error: WebSocketError) {
        failure = error
        tcp.abort(nil)
    }

    func connectionRead(_ tcp: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        guard completion != nil else { return }
        do throws(WebSocketError) {
            let parsed: (head: ArraySlice<UInt8>, rest: [UInt8])?
            do { parsed = try accumulator.feed(UnsafeRawBufferPointer(bytes)) } catch {
                throw WebSocketError.headerTooLarge(limit: configuration.maxHeaderSize)
            }
            guard let (head, rest) = parsed else { return }
            let response = try ClientHandshake.parseResponse(head, limits: configuration.headLimits)
            let subprotocol = try handshake.validate(response)
            let deflate = try handshake.negotiatedDeflate(response)
            if let t = timer { tcp.loop.cancel(t); timer = nil }
            let ws = WebSocketConnection(tcp: tcp, role: .client, configuration: configuration,
                                         subprotocol: subprotocol, request: nil, deflate: deflate, handler: handler)
            let c = completion
            completion = nil
            ws.start(leftover: [])
            c?(.success(ws))
            if !rest.isEmpty && !tcp.isClosed {
                var copy = rest
                copy.withUnsafeMutableBytes { ws.connectionRead(tcp, $0) }
            }
        } catch {
            fail(tcp, error)
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) {}
    func connectionClosed(_ tcp: TCPConnection, error: NetError?) {
        if let t = timer { tcp.loop.cancel(t); timer = nil }
        guard let c = completion else { return }
        completion = nil
        c(.failure(failure ?? error.map { .transport($0) } ?? .invalidUpgradeResponse("connection closed during the handshake")))
    }
}
