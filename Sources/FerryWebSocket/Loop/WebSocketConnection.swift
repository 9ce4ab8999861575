import CFerrySystem
import FerryNet

/// An open WebSocket connection at loop level: it binds a `WebSocketStateMachine` to a
/// `TCPConnection` and calls its `WebSocketHandler` on the loop thread. All methods must be
/// called on `loop`. The async `WebSocket` type is built on it.
///
/// Safety of `@unchecked Sendable`: all mutable state is used on `loop` only (asserted); the
/// reference may cross threads so other threads can `loop.execute` work on it.
public final class WebSocketConnection: ConnectionHandler, @unchecked Sendable {
    /// The loop that owns the connection.
    public var loop: EventLoop { tcp.loop }
    /// The transport.
    public let tcp: TCPConnection
    /// Our role.
    public var role: WebSocketRole { machine.role }
    /// The subprotocol negotiated in the handshake, if any.
    public let subprotocol: String?
    /// The upgrade request (server side) for the application's reference.
    public let request: HTTPRequestHead?
    /// The peer's TLS certificate: the server's (client side), or the client's when it
    /// presented one for mutual TLS (server side). Nil without TLS.
    public let peerCertificate: TLSCertificate?
    /// permessage-deflate as negotiated in the handshake; nil when not in use.
    public var permessageDeflate: PerMessageDeflateAgreement? { machine.deflate }
    // `@exclusivity(unchecked)` on `handler`, `lastActivity` and `finished`, read on every
    // message: loop-confined (see above), and never borrowed across a call.
    /// The receiver of events.
    @exclusivity(unchecked) public var handler: WebSocketHandler?
    private let machine: WebSocketStateMachine
    private let configuration: WebSocketConfiguration
    private var closeTimer: TimerHandle?
    private var pingTimer: TimerHandle?
    private var pongDeadline: TimerHandle?
    @exclusivity(unchecked) private var lastActivity: UInt64 = 0
    @exclusivity(unchecked) private var finished = false
    private var pendingPings: [(payload: [UInt8], done: (WebSocketError?) -> Void)] = []
    private var receivedClose: (CloseCode, String)?
    private var failure: WebSocketError?
    /// Called once the connection is fully closed (used by servers to count connections).
    var onFinish: (() -> Void)?

    init(tcp: TCPConnection, role: WebSocketRole, configuration: WebSocketConfiguration,
         subprotocol: String?, request: HTTPRequestHead?, deflate: PerMessageDeflateAgreement? = nil,
         handler: WebSocketHandler?) {
        self.tcp = tcp
        self.configuration = configuration
        self.subprotocol = subprotocol
        self.request = request
        peerCertificate = tcp.tlsSession?.peerCertificate
        self.handler = handler
        machine = WebSocketStateMachine(role: role, configuration: configuration, deflate: deflate) { _ in }
        // unowned(unsafe): the machine is this connection's and this connection holds `tcp`
        // strongly for its whole life, so `tcp` outlives every call; plain `unowned` would pay
        // an unowned-retain per frame.
        machine.output = { [unowned(unsafe) tcp] bytes in tcp.write(bytes) }
    }

    /// Takes over the TCP connection after the handshake: starts reading and processes bytes
    /// that arrived behind the HTTP head.
    func start(leftover: [UInt8]) {
        tcp.replaceHandler(self)
        handler?.webSocketDidOpen(self)
        schedulePing()
        if !leftover.isEmpty {
            var copy = leftover
            copy.withUnsafeMutableBytes { connectionRead(tcp, $0) }
        }
    }

    /// Whether the output queue is below its high watermark.
    public var isWritable: Bool { tcp.isWritable }
    /// Bytes queued for the socket.
    public var bufferedByteCount: Int { tcp.bufferedByteCount }
    /// Where the close handshake stands.
    public var closeState: WebSocketStateMachine.CloseState { machine.closeState }
    /// Whether the connection is still open for sending messages.
    public var isOpen: Bool { machine.closeState == .open && !finished }

    /// Sends a message. The bytes are copied (or written straight to the socket).
    public func send(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer) {
        loop.preconditionInLoop()
        machine.send(kind, payload)
    }

    /// Sends a message whose payload is `head`, `body` and `tail` in order, without joining
    /// them first (see `WebSocketStateMachine.send(_:head:body:tail:)`).
    public func send(_ kind: MessageKind, head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {
        loop.preconditionInLoop()
        machine.send(kind, head: head, body: body, tail: tail)
    }

    /// Sends a message from an array.
    public func send(_ kind: MessageKind, _ payload: [UInt8]) {
        payload.withUnsafeBytes { send(kind, $0) }
    }

    /// Sends a text message.
    public func send(text: String) {
        var s = text
        s.withUTF8 { send(.text, UnsafeRawBufferPointer($0)) }
    }

    /// Sends one fragment of a message (see `WebSocketStateMachine.sendFragment`).
    public func sendFragment(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer, fin: Bool) {
        loop.preconditionInLoop()
        machine.sendFragment(kind, payload, fin: fin)
    }

    /// Sends a ping; `done` runs when its pong arrives (nil) or the connection closes first.
    public func ping(_ payload: [UInt8] = [], done: @escaping (WebSocketError?) -> Void = { _ in }) {
        loop.preconditionInLoop()
        guard isOpen else { done(.closed(code: receivedClose?.0 ?? .abnormalClosure, reason: "")); return }
        pendingPings.append((payload, done))
        payload.withUnsafeBytes { machine.sendPing($0) }
    }

    /// Starts the close handshake. The handler's `webSocketDidClose` follows when it completes
    /// or `timeout` seconds pass (the configuration's `closeTimeout` when nil); then the
    /// connection is dropped.
    public func close(code: CloseCode = .normalClosure, reason: String = "", timeout: Double? = nil) {
        loop.preconditionInLoop()
        guard !finished, machine.closeState == .open else { return }
        machine.sendClose(code: code, reason: reason)
        armCloseTimer(timeout)
    }

    /// Stops reading from the socket until `resumeReading()` (inbound backpressure).
    public func pauseReading() { tcp.pauseReading() }
    /// Resumes reading.
    public func resumeReading() { tcp.resumeReading() }

    /// Drops the connection at once without a close handshake.
    public func abort(_ error: WebSocketError) {
        loop.preconditionInLoop()
        failure = failure ?? error
        tcp.abort(nil)
    }

    // MARK: ConnectionHandler

    public func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        if configuration.pingInterval != nil { lastActivity = loopNow() }
        machine.receive(bytes) { event in
            switch event {
            case let .message(kind, payload):
                handler?.webSocket(self, didReceive: kind, payload: payload)
            case .ping:
                break
            case .pong(let payload):
                if !pendingPings.isEmpty {
                    let p = pendingPings.removeFirst()
                    p.done(nil)
                }
                if let t = pongDeadline { loop.cancel(t); pongDeadline = nil }
                handler?.webSocket(self, didReceivePong: payload)
            case let .closeReceived(code, reason):
                receivedClose = (code ?? .noStatusReceived, reason)
                // The server closes TCP first (RFC 6455 §7.1.1); a client waits for it, briefly.
                if role == .server { tcp.close() } else { armCloseTimer() }
            case .failed(let error):
                failure = error
                if role == .server { tcp.close() } else { armCloseTimer() }
            }
        }
    }

    public func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {
        handler?.webSocket(self, writabilityChanged: writable)
    }

    public func connectionInputClosed(_ connection: TCPConnection) {
        // EOF: whatever state the handshake is in, the connection is over once output drains.
        tcp.close()
    }

    public func connectionClosed(_ connection: TCPConnection, error: NetError?) {
        guard !finished else { return }
        finished = true
        machine.markClosed()
        for t in [closeTimer, pingTimer, pongDeadline].compactMap({ $0 }) { loop.cancel(t) }
        let code: CloseCode
        let reason: String
        var err = failure
        if let (c, r) = receivedClose {
            code = c; reason = r
        } else {
            code = .abnormalClosure; reason = ""
            if err == nil {
                if let error { err = .transport(error) }
                else if machine.sentClose == nil { err = .closed(code: .abnormalClosure, reason: "connection dropped without a close frame") }
                else { err = .timedOut }
            }
        }
        let pings = pendingPings
        pendingPings = []
        for p in pings { p.done(err ?? .closed(code: code, reason: reason)) }
        let h = handler
        handler = nil
        h?.webSocketDidClose(self, code: code, reason: reason, error: err)
        onFinish?()
        onFinish = nil
    }

    // MARK: Timers
    //
    // The timers hold the connection strongly, not `[weak self]`: a weak reference moves an
    // object's reference count to a side table for good, after which every retain and release
    // of it — several per frame, from the loop and the pool — takes the runtime's slow path
    // (it was a fifth of a replication server's loop thread). A strong capture makes no cycle
    // that outlives the connection: `connectionClosed` cancels all three timers, which drops
    // their closures, and a timer that fires first finds the connection closed and stops.

    private func armCloseTimer(_ timeout: Double? = nil) {
        guard closeTimer == nil, !finished else { return }
        closeTimer = loop.schedule(after: timeout ?? configuration.closeTimeout) { [self] in
            if self.failure == nil && self.receivedClose == nil { self.failure = .timedOut }
            self.tcp.abort(nil)
        }
    }

    private func loopNow() -> UInt64 { ferry_monotonic_ns() }

    private func schedulePing() {
        guard let interval = configuration.pingInterval, !finished else { return }
        lastActivity = loopNow()
        pingTimer = loop.schedule(after: interval) { [self] in pingTimerFired() }
    }

    private func pingTimerFired() {
        guard let interval = configuration.pingInterval, isOpen else { return }
        let idle = Double(loopNow() &- lastActivity) / 1e9
        if idle + 0.001 < interval {
            pingTimer = loop.schedule(after: interval - idle) { [self] in pingTimerFired() }
            return
        }
        machine.sendPing(UnsafeRawBufferPointer(start: nil, count: 0))
        if pongDeadline == nil {
            pongDeadline = loop.schedule(after: configuration.pingTimeout) { [self] in
                guard isOpen else { return }
                self.failure = .timedOut
                // Dropped at once: a peer that stopped answering may also have stopped reading,
                // and a close that waits to flush what is queued for it would never finish.
                self.tcp.abort(nil)
            }
        }
        pingTimer = loop.schedule(after: interval) { [self] in pingTimerFired() }
    }
}

