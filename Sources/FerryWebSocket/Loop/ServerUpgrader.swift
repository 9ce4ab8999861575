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
    /// Takes connections whose request is not a WebSocket upgrade (nil: they are refused).
    private let plainHTTP: WebSocketListener.PlainHTTPHandler?
    private var timer: TimerHandle?
    private var done = false
    /// A `.deferred` decision is pending: bytes that arrive meanwhile (a client may send
    /// frames before it sees 101) are kept for the connection, not parsed as a head.
    private var deciding = false
    private var early: [UInt8] = []
    private let logger: Logger

    init(configuration: WebSocketConfiguration, logger: Logger,
         plainHTTP: WebSocketListener.PlainHTTPHandler? = nil,
         hook: @escaping (UpgradeRequest) -> UpgradeDecision, onFinish: @escaping () -> Void) {
        self.configuration = configuration
        self.plainHTTP = plainHTTP
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

    /// Runs the upgrade on a connection another protocol's handler read first: `bytes` are
    /// what it read from the start of the upgrade request on.
    func adopt(_ tcp: TCPConnection, bytes: [UInt8]) {
        tcp.replaceHandler(self)
        guard !tcp.isClosed else { return }
        startTimer(tcp)
        var copy = bytes
        copy.withUnsafeMutableBytes { connectionRead(tcp, $0) }
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
        if let plainHTTP, !Self.asksForUpgrade(head) {
            // Another protocol on the same port (a REST API): its handler reads the request
            // again from its first byte, with its own decoder and limits.
            done = true
            if let t = timer { tcp.loop.cancel(t); timer = nil }
            plainHTTP(HandedOffConnection(tcp: tcp, bytes: Array(head) + [13, 10, 13, 10] + rest, finished: onFinish))
            return
        }
        let request: HTTPRequestHead
        let offer: ServerHandshake.Offer
        do throws(WebSocketError) {
            request = try ServerHandshake.parseRequest(head, limits: configuration.headLimits)
            offer = try ServerHandshake.validate(request)
        } catch {
            var status = 400, headers = HTTPHeaders()
            if case let .badHandshake(s, _) = error { status = s }
            if status == 426 { headers.add(name: "Upgrade", value: "websocket"); headers.add(name: "Sec-WebSocket-Version", value: "13") }
            if status == 405 { headers.add(name: "Allow", value: "GET") }
            logger.debug("refused upgrade", metadata: ["status": "\(status)", "reason": "\(error)"])
            refuse(tcp, status: status, message: "\(error)", headers: headers)
            return
        }
        var upgrade = UpgradeRequest(head: request, offeredSubprotocols: offer.subprotocols, remoteAddress: tcp.remoteAddress)
        if let session = tcp.tlsSession {
            upgrade.isSecure = true
            upgrade.peerCertificate = session.peerCertificate
        }
        apply(hook(upgrade), tcp, request: request, offer: offer, rest: rest)
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

    /// Whether a head carries an `Upgrade` field (any value: a bad upgrade is the WebSocket
    /// side's to refuse, with its own status).
    static func asksForUpgrade(_ head: ArraySlice<UInt8>) -> Bool {
        // Field names are matched at line starts, case-insensitively, without a full parse.
        let name = Array("\r\nupgrade:".utf8)
        guard head.count > name.count else { return false }
        var i = head.startIndex
        while i + name.count <= head.endIndex {
            var j = 0
            while j < name.count {
                var b = head[i + j]
                if b >= 65 && b <= 90 { b |= 0x20 }
                if b != name[j] { break }
                j += 1
            }
            if j == name.count { return true }
            i += 1
        }
        return false
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ connection: TCPConnection) { done = true }
    func connectionClosed(_ tcp: TCPConnection, error: NetError?) {
        if let t = timer { tcp.loop.cancel(t); timer = nil }
        done = true
        onFinish()
    }
}

