import FerryNet
import Logging

/// Reads and answers the HTTP upgrade on a freshly accepted connection, then hands it to a
/// `WebSocketConnection`. Loop-confined.
final class ServerUpgrader: ConnectionHandler {
    private var parser: HTTPHeadParser
    private let configuration: WebSocketConfiguration
    private let hook: (UpgradeRequest) -> UpgradeDecision
    private let onFinish: () -> Void
    private var timer: TimerHandle?
    private var done = false
    private let logger: Logger

    init(configuration: WebSocketConfiguration, logger: Logger,
         hook: @escaping (UpgradeRequest) -> UpgradeDecision, onFinish: @escaping () -> Void) {
        self.configuration = configuration
        self.hook = hook
        self.onFinish = onFinish
        self.logger = logger
        parser = HTTPHeadParser(maxSize: configuration.maxHeaderSize)
    }

    func start(_ tcp: TCPConnection) {
        tcp.start(handler: self)
        guard !tcp.isClosed else { return }
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
        let parsed: (head: [UInt8], rest: [UInt8])?
        do {
            parsed = try parser.feed(UnsafeRawBufferPointer(bytes))
        } catch {
            refuse(tcp, status: 431, message: "\(error)")
            return
        }
        guard let (head, rest) = parsed else { return }
        let request: HTTPRequestHead
        let offer: ServerHandshake.Offer
        do {
            request = try HTTPHeadParser.parseRequest(head)
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
        switch hook(upgrade) {
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

