import FerryHTTP
import FerryNet
import Logging

/// Reads and answers the HTTP upgrade on a freshly accepted connection, then hands it to a
/// `WebSocketConnection`. Loop-confined.
final class ServerUpgrader: ConnectionHandler {
    private var accumulator: HTTPHeadAccumulator
    private let configuration: WebSocketConfiguration
    private let hook: (UpgradeRequest) -> UpgradeDecision
    private let onFinish: () -> Void
    private var timer: TimerHandle?
    private var done = false
    /// A `.deferred` decision is pending: bytes that arrive meanwhile (a client may send
    /// frames before it sees 101) are kept for the connection, not parsed as a head.
    private var deciding = false
    private var early: [UInt8] = []
    private let logger: Logger

    init(configuration: WebSocketConfiguration, logger: Logger,
         hook: @escaping (UpgradeRequest) -> UpgradeDecision, onFinish: @escaping () -> Void) {
        self.configuration = configuration
        self.hook = hook
        self.onFinish = onFinish
        self.logger = logger
        accumulator = HTTPHeadAccumulator(maxSize: configuration.maxHeaderSize)
    }

    func start(_ tcp: TCPConnection) {
        tcp.start(handler: self)
        guard !tcp.isClosed else { return }
        startTimer(tcp)
    }

    /// Runs the upgrade on a connection whose HTTP server read the upgrade request (`request`,
    /// parsed once, by that server); `rest` is what the client sent after it.
    func adopt(_ tcp: TCPConnection, request: HTTPRequestHead, rest: [UInt8]) {
        tcp.replaceHandler(self)
        guard !tcp.isClosed else { return }
        startTimer(tcp)
        upgrade(tcp, request: request, rest: rest)
    }

    private func startTimer(_ tcp: TCPConnection) {
        // Strong captures (no side tables on the connection's hot objects): every path that
        // ends the handshake cancels the timer, which releases them.
        timer = tcp.loop.schedule(after: configuration.handshakeTimeout) { [self, tcp] in
            guard !self.done else { return }
            self.logger.debug("handshake timed out", metadata: ["peer": "\(tcp.remoteAddress.map { "\($0)" } ?? "?")"])
            self.refuse(tcp, status: 408, message: "handshake timed out")
        }
    }

    private func refuse(_ tcp: TCPConnection, status: Int, message: String, headers: HTTPHeaders = HTTPHeaders()) {
        done = true
        if let t = timer { tcp.loop.cancel(t); timer = nil }
        tcp.write(Handshake.errorResponse(status: status, message: message, headers: headers))
        tcp.close()
    }

    func connectionRead(_ tcp: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        guard !done else { return }
        if deciding {
            early += UnsafeRawBufferPointer(bytes)
            return
        }
        let parsed: (head: ArraySlice<UInt8>, rest: [UInt8])?
        do {
            parsed = try accumulator.feed(UnsafeRawBufferPointer(bytes))
        } catch {
            refuse(tcp, status: 431, message: "\(WebSocketError.headerTooLarge(limit: configuration.maxHeaderSize))")
            return
        }
        guard let (head, rest) = parsed else { return }
        let request: HTTPRequestHead
        do throws(WebSocketError) { request = try ServerHandshake.parseRequest(head, limits: configuration.headLimits) } catch {
            refuse(tcp, failing: error)
            return
        }
        upgrade(tcp, request: request, rest: rest)
    }

    /// Checks the upgrade request, asks the hook, and answers.
    private func upgrade(_ tcp: TCPConnection, request: HTTPRequestHead, rest: [UInt8]) {
        let offer: ServerHandshake.Offer
        do throws(WebSocketError) { offer = try ServerHandshake.validate(request) } catch {
            refuse(tcp, failing: error)
            return
        }
        var upgrade = UpgradeRequest(head: request, offeredSubprotocols: offer.subprotocols, remoteAddress: tcp.remoteAddress)
        if let session = tcp.tlsSession {
            upgrade.isSecure = true
            upgrade.peerCertificate = session.peerCertificate
        }
        apply(hook(upgrade), tcp, request: request, offer: offer, rest: rest)
    }

    /// Refuses a request the handshake rules reject, with the status they name.
    private func refuse(_ tcp: TCPConnection, failing error: WebSocketError) {
        var status = 400, headers = HTTPHeaders()
        if case let .badHandshake(s, _) = error { status = s }
        if status == 426 { headers.add(name: "Upgrade", value: "websocket"); headers.add(name: "Sec-WebSocket-Version", value: "13") }
        if status == 405 { headers.add(name: "Allow", value: "GET") }
        logger.debug("refused upgrade", metadata: ["status": "\(status)", "reason": "\(error)"])
        refuse(tcp, status: status, message: "\(error)", headers: headers)
    }

    private func apply(_ decision: UpgradeDecision, _ tcp: TCPConnection, request: HTTPRequestHead,
                       offer: ServerHandshake.Offer, rest: [UInt8]) {
        switch decision {
        case let .deferred(start):
            deciding = true
            // The client has sent its whole request: the handshake timeout (a guard against
            // slow clients) stops here, and the server's own decision (a password check on a
            // busy machine) gets a generous bound of its own instead.
            if let t = timer { tcp.loop.cancel(t) }
            timer = tcp.loop.schedule(after: max(120, configuration.handshakeTimeout)) { [self, tcp] in
                guard !self.done else { return }
                self.refuse(tcp, status: 503, message: "the upgrade could not be decided in time", headers: HTTPHeaders([("Retry-After", "1")]))
            }
            start { [self, tcp] later in
                // Dropped when the connection closed or the handshake timed out meanwhile.
                guard !done, !tcp.isClosed else { return }
                deciding = false
                if case .deferred = later {
                    refuse(tcp, status: 500, message: "the upgrade was never decided")
                    return
                }
                let more = early
                early = []
                apply(later, tcp, request: request, offer: offer, rest: rest + more)
            }
        case let .refuse(status, message, headers):
            refuse(tcp, status: status, message: message, headers: headers)
        case let .accept(subprotocol, headers, handler):
            done = true
            if let t = timer { tcp.loop.cancel(t); timer = nil }
            var all = configuration.extraHeaders
            for h in headers { all.add(name: h.name, value: h.value) }
            let deflate = configuration.permessageDeflate.flatMap {
                PerMessageDeflateNegotiation.serverAccept(offers: offer.extensions, options: $0)
            }
            tcp.write(ServerHandshake.acceptResponse(acceptValue: offer.acceptValue, subprotocol: subprotocol,
                                                     extensions: deflate?.header, headers: all))
            let ws = WebSocketConnection(tcp: tcp, role: .server, configuration: configuration,
                                         subprotocol: subprotocol, request: request, deflate: deflate?.agreement,
                                         handler: handler)
            ws.onFinish = onFinish
            ws.start(leftover: rest)
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) { done = true }
    func connectionClosed(_ tcp: TCPConnection, error: NetError?) {
        if let t = timer { tcp.loop.cancel(t); timer = nil }
        done = true
        onFinish()
    }
}

