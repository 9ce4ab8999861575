import FerryNet
import FerryWebSocket
import Logging
import Synchronization

/// A request received on a `BLIPConnection`, with the means to answer it. `respond` and
/// `respondError` may be called from any thread, once; NoReply requests cannot be answered.
public struct BLIPIncomingRequest: Sendable {
    /// The request.
    public let message: BLIPMessage
    /// The connection it arrived on.
    public let connection: BLIPConnection

    /// Sends a response with these properties and body (compressed if asked).
    public func respond(properties: BLIPProperties = BLIPProperties(), body: [UInt8] = [], compressed: Bool = false) {
        connection.sendResponse(.response(properties: properties, body: body, compressed: compressed), to: message.number)
    }

    /// Sends an error response (`Error-Domain`, `Error-Code`, message as the body).
    public func respondError(domain: String = "BLIP", code: Int, message text: String) {
        connection.sendResponse(.errorResponse(domain: domain, code: code, message: text), to: message.number)
    }

    /// Answers several requests, each with its reply (`BLIPMessage.response` or
    /// `.errorResponse`), in order, from any thread: one hop to a connection's loop for each run
    /// of replies on it, rather than one per reply (a batch of stored revisions is answered so).
    public static func respond(_ answers: [(request: BLIPIncomingRequest, reply: BLIPMessage)]) {
        var start = answers.startIndex
        while start < answers.endIndex {
            let connection = answers[start].request.connection
            var end = start + 1
            while end < answers.endIndex && answers[end].request.connection === connection { end += 1 }
            connection.sendResponses(answers[start..<end].map { ($0.request.message.number, $0.reply) })
            start = end
        }
    }
}

/// A BLIP 3 connection over a Ferry WebSocket: many request/response messages multiplexed on
/// one socket, with urgent scheduling, compression, checksums and flow control. Incoming
/// requests go to handlers registered by `Profile` (unknown profiles are answered ERR BLIP/404
/// "no handler for message"). Handlers run on the connection's event loop.
///
/// Safety of `@unchecked Sendable`: the session, the WebSocket and the tables of pending
/// responses and handlers are touched only on `loop` (public entry points hop there); the
/// close state read by other threads is behind a Mutex.
public final class BLIPConnection: WebSocketHandler, @unchecked Sendable {
    // `@exclusivity(unchecked)` on the stored properties below: Swift checks exclusive access to
    // class properties at run time, and those checks were ~13% of a small-message round trip.
    // Safe because every access happens on the owning event loop's thread, and no method keeps
    // an `inout` access to one of them open across a call that could reach it again (callbacks
    // run after the access ends; `pump` moves `frameBuffer` out before framing). The debug test
    // suite ran with the checks on before they were turned off.
    /// A loop-level request handler.
    public typealias Handler = @Sendable (BLIPIncomingRequest) -> Void

    /// The event loop that owns the connection.
    public let loop: EventLoop
    let session: BLIPSession
    @exclusivity(unchecked) var ws: WebSocketConnection?
    @exclusivity(unchecked) private var pending = NumberMap<(Result<BLIPMessage, BLIPError>) -> Void>()
    @exclusivity(unchecked) var handlers: [String: Handler] = [:]
    @exclusivity(unchecked) private var defaultHandler: Handler?
    /// The last profile dispatched and its handler: a string compare instead of hashing the
    /// profile for every request of a steady stream (cleared when handlers change).
    @exclusivity(unchecked) var lastRoute: (profile: String, handler: Handler)?
    /// Streaming state, used by BLIPConnection+Streaming.swift, all on the loop: handlers
    /// that take request bodies as streams, requests whose responses are streamed, streams
    /// opened during a read (dispatched once it returns), bodies being received, writers
    /// waiting for their backlog to drain, and who holds reading paused.
    @exclusivity(unchecked) var streamingHandlers: [String: StreamingHandler] = [:]
    @exclusivity(unchecked) var streamingPending = NumberMap<BLIPOutgoingRequest.ResponseSlot>()
    @exclusivity(unchecked) var openedStreams: [(request: BLIPMessage, body: IncomingBody, handler: StreamingHandler)] = []
    @exclusivity(unchecked) var activeBodies: [IncomingBody] = []
    @exclusivity(unchecked) var blockedWriters: [BLIPBodyWriter.State] = []
    @exclusivity(unchecked) var readPausers = 0
    @exclusivity(unchecked) var userPausedReading = false
    /// The frame being written, reused for every frame.
    @exclusivity(unchecked) private var frameBuffer: [UInt8] = []
    /// Mirrors `closedState` for code on the loop, which need not take the lock.
    @exclusivity(unchecked) var closedOnLoop: BLIPError?
    /// A frame is being handed to the WebSocket (`pump`, `transmit`): re-entrant calls from
    /// inside that write must not frame anything.
    @exclusivity(unchecked) private var emitting = false
    /// The write queue's size after the last mid-read flush.
    @exclusivity(unchecked) private var flushedAt = 0
    /// Bytes of replies queued during a read before they are flushed.
    static let flushEvery = 32 * 1024
    /// Why the connection ended (what pending and later requests fail with), and whether that
    /// was a clean close (1000/1001 with no error) rather than a failure.
    let closedState = Mutex<(error: BLIPError, clean: Bool)?>(nil)
    @exclusivity(unchecked) private var closeWaiters: [CheckedContinuation<BLIPError?, Never>] = []
    @exclusivity(unchecked) var openWaiter: ((Result<Void, BLIPError>) -> Void)?
    private let logger: Logger
    /// The app protocol negotiated (`BLIP_3+<app>`).
    @exclusivity(unchecked) public private(set) var subprotocol: String?

    init(loop: EventLoop, configuration: BLIPConfiguration, logger: Logger) {
        self.loop = loop
        self.logger = logger
        session = BLIPSession(configuration: configuration)
        session.openStream = { [unowned self] head in self.openIncomingStream(head) }
    }

    /// The WebSocket subprotocol token for an app id, e.g. `BLIP_3+CBMobile_3`.
    public static func subprotocol(app: String) -> String { BLIPConstants.subprotocolPrefix + app }

    /// WebSocket settings suited to BLIP: frames are ≤ 16 KiB, so messages over 1 MiB are refused.
    public static func webSocketConfiguration(app: String) -> WebSocketConfiguration {
        var c = WebSocketConfiguration()
        c.subprotocols = [subprotocol(app: app)]
        c.maxMessageSize = 1 << 20
        c.maxFrameSize = 1 << 20
        return c
    }

    // MARK: Connecting

    /// Connects to a BLIP server at a `ws://` or `wss://` URL, offering `BLIP_3+<app>`; TLS
    /// uses `tls` (a client context), or the system trust store when nil.
    public static func connect(to url: String, app: String, configuration: BLIPConfiguration = BLIPConfiguration(),
                               webSocket: WebSocketConfiguration? = nil, tls: TLSContext? = nil, group: EventLoopGroup = .shared,
                               logger: Logger = Logger(label: "ferry.blip")) async throws(BLIPError) -> BLIPConnection {
        let parsed: WebSocketURL
        do { parsed = try WebSocketURL(url) } catch { throw .webSocket(error) }
        var wsConfig = webSocket ?? webSocketConfiguration(app: app)
        wsConfig.subprotocols = [subprotocol(app: app)]
        let loop = group.next()
        let conn = BLIPConnection(loop: loop, configuration: configuration, logger: logger)
        let result: Result<WebSocketConnection, WebSocketError> = await withCheckedContinuation { c in
            ClientConnector.connect(to: parsed, on: loop, configuration: wsConfig, tls: tls, handler: conn) { c.resume(returning: $0) }
        }
        switch result {
        case .failure(let e): throw .webSocket(e)
        case .success(let ws):
            guard ws.subprotocol == subprotocol(app: app) else {
                loop.execute { ws.close(code: .protocolError, reason: "BLIP subprotocol not accepted") }
                throw .webSocket(.invalidUpgradeResponse("server did not accept \(subprotocol(app: app))"))
            }
        }
        return conn
    }

    /// Serves BLIP on `path` for `app`: each accepted connection is handed to `onConnection` on
    /// its loop (register handlers there). Requests for other paths get 404; clients that do not
    /// offer `BLIP_3+<app>` get 400. With `tls` (a server context) it serves `wss://`.
    public static func listen(host: String = "127.0.0.1", port: Int = 0, path: String? = nil, app: String,
                              configuration: BLIPConfiguration = BLIPConfiguration(), tls: TLSContext? = nil,
                              group: EventLoopGroup = .shared, logger: Logger = Logger(label: "ferry.blip"),
                              onConnection: @escaping @Sendable (BLIPConnection) -> Void) async throws(BLIPError) -> WebSocketListener {
        let token = subprotocol(app: app)
        do {
            return try await WebSocketListener.bind(host: host, port: port, group: group,
                                                    configuration: webSocketConfiguration(app: app), tls: tls, logger: logger) { request, loop in
                if let path, request.path != path { return .refuse(status: 404, message: "no BLIP endpoint at \(request.path)") }
                guard request.offeredSubprotocols.contains(token) else {
                    return .refuse(status: 400, message: "this endpoint speaks \(token) only")
                }
                let conn = BLIPConnection(loop: loop, configuration: configuration, logger: logger)
                conn.openWaiter = { result in if case .success = result { onConnection(conn) } }
                return .accept(subprotocol: token, handler: conn)
            }
        } catch {
            throw .webSocket(.transport(error))
        }
    }

    // MARK: Handlers (loop level)

    /// Routes requests whose `Profile` is `profile` to `handler` (on the loop thread). Handlers
    /// are released when the connection closes; registering on a closed one does nothing.
    public func register(profile: String, _ handler: @escaping Handler) {
        onLoop {
            guard $0.closedOnLoop == nil else { return }
            $0.handlers[profile] = handler; $0.streamingHandlers[profile] = nil; $0.lastRoute = nil
        }
    }

    /// Receives requests no registered profile matched (instead of the automatic 404).
    public func registerDefault(_ handler: @escaping Handler) {
        onLoop {
            guard $0.closedOnLoop == nil else { return }
            $0.defaultHandler = handler; $0.lastRoute = nil
        }
    }

    func onLoop(_ body: @escaping @Sendable (BLIPConnection) -> Void) {
        if loop.inEventLoop { body(self) } else { loop.execute { body(self) } }
    }

    /// Stops reading from the socket: the peer's messages freeze once BLIP's window (128,000
    /// unacknowledged bytes) and the TCP buffers fill. Pending replies are not affected.
    public func pauseReading() { onLoop { $0.userPausedReading = true; $0.ws?.pauseReading() } }

    /// Resumes reading after `pauseReading()` (unless a streamed body's reader is far behind:
    /// then reading resumes when it catches up).
    public func resumeReading() {
        onLoop { conn in
            conn.userPausedReading = false
            if conn.readPausers == 0 { conn.ws?.resumeReading() }
        }
    }

    /// Flow-control figures of the sending side, read on the loop.
    public func flowState() async -> BLIPFlowState {
        await withCheckedContinuation { c in
            onLoop { conn in
                c.resume(returning: BLIPFlowState(bytesSent: conn.session.messageBytesSent,
                                                  unacknowledgedBytes: conn.session.unacknowledgedBytes,
                                                  bufferedBytes: conn.ws?.bufferedByteCount ?? 0,
                                                  frozen: conn.session.hasFrozenMessage))
            }
        }
    }

    // MARK: Sending

    /// Sends a request; `completion` runs on the loop with its response (an ERR response is a
    /// `.errorResponse` failure). NoReply requests complete as soon as they are queued.
    public func send(_ request: BLIPMessage, completion: @escaping @Sendable (Result<BLIPMessage, BLIPError>) -> Void) {
        // Called on the loop (from a handler or a completion) it runs at once, with no closure
        // allocated for the hop.
        if loop.inEventLoop { sendOnLoop(request, completion) } else { loop.execute { self.sendOnLoop(request, completion) } }
    }

    /// Sends several requests, in order, with one hop to the loop for all of them (rather than
    /// one per request); `completion` runs on the loop for each, with its index in `requests`.
    public func send(_ requests: [BLIPMessage],
                     completion: @escaping @Sendable (Int, Result<BLIPMessage, BLIPError>) -> Void) {
        guard !requests.isEmpty else { return }
        if loop.inEventLoop { sendAllOnLoop(requests, completion) } else { loop.execute { self.sendAllOnLoop(requests, completion) } }
    }

    private func sendAllOnLoop(_ requests: [BLIPMessage], _ completion: @escaping (Int, Result<BLIPMessage, BLIPError>) -> Void) {
        for (i, r) in requests.enumerated() { sendOnLoop(r) { completion(i, $0) } }
    }

    private func sendOnLoop(_ request: BLIPMessage, _ completion: @escaping (Result<BLIPMessage, BLIPError>) -> Void) {
        if let e = closedOnLoop ?? closedState.withLock({ $0?.error }) { completion(.failure(e)); return }
        let (number, flags) = session.numberRequest(request)
        if !request.isNoReply { pending.insert(completion, for: number) }
        transmit(type: .request, number: number, flags: flags, message: request)
        // After it is queued or sent: a completion that sends again must come after it.
        if request.isNoReply { completion(.success(BLIPMessage(type: .response, number: number))) }
    }

    /// Sends a numbered message: framed at once when nothing is queued ahead of it and the
    /// socket is writable (`BLIPSession.frameWhole`), else queued for `pump`.
    private func transmit(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, message: BLIPMessage) {
        if !emitting, let ws, ws.isOpen, ws.isWritable {
            var buffer = frameBuffer
            frameBuffer = []
            emitting = true
            let sent = session.frameWhole(type: type, number: number, flags: flags, message: message, into: &buffer,
                                          emit: { ws.send(.binary, head: $0, body: $1, tail: $2) })
            frameBuffer = buffer
            emitting = false
            if sent {
                if !blockedWriters.isEmpty { resumeDrainedWriters() }
                return
            }
        }
        session.enqueue(OutgoingMessage(type: type, number: number, flags: flags, message: message))
        pump()
    }

    /// Sends a request and waits for its response. Throws `.errorResponse` for an ERR reply and
    /// `.disconnected` if the connection closes first.
    public func send(_ request: BLIPMessage) async throws(BLIPError) -> BLIPMessage {
        let r: Result<BLIPMessage, BLIPError> = await withCheckedContinuation { c in
            send(request) { c.resume(returning: $0) }
        }
        return try r.get()
    }

    func sendResponse(_ reply: BLIPMessage, to number: UInt64) {
        if loop.inEventLoop { sendResponseOnLoop(reply, number) } else { loop.execute { self.sendResponseOnLoop(reply, number) } }
    }

    /// Sends responses in order with one hop to the loop for all of them.
    func sendResponses(_ replies: [(number: UInt64, reply: BLIPMessage)]) {
        if loop.inEventLoop { for r in replies { sendResponseOnLoop(r.reply, r.number) } }
        else { loop.execute { for r in replies { self.sendResponseOnLoop(r.reply, r.number) } } }
    }

    private func sendResponseOnLoop(_ reply: BLIPMessage, _ number: UInt64) {
        let type: BLIPMessageType, flags: BLIPFlags
        do { (type, flags) = try session.claimResponse(reply, to: number) } catch {
            logger.warning("cannot respond", metadata: ["request": "\(number)", "error": "\(error)"])
            return
        }
        transmit(type: type, number: number, flags: flags, message: reply)
    }

    /// Writes frames while the socket takes them; flow control and writability pause it.
    func pump() {
        // A write can report writability from inside itself and so call back here while a
        // frame is half written: the outer loop carries on, so the inner call does nothing.
        guard !emitting, let ws, ws.isOpen else { return }
        // The buffer is borrowed for the whole loop: one access to the stored property, not one
        // per frame (dynamic exclusivity checks showed in profiles).
        var buffer = frameBuffer
        frameBuffer = []
        emitting = true
        var failure: BLIPError?
        do throws(BLIPError) {
            while ws.isWritable, try session.nextFrame(into: &buffer, emit: { ws.send(.binary, head: $0, body: $1, tail: $2) }) {}
        } catch {
            failure = error
        }
        frameBuffer = buffer
        emitting = false
        if let failure { fail(failure) }
        if !blockedWriters.isEmpty { resumeDrainedWriters() }
    }

    /// Closes the connection (WebSocket 1000 by default; a server shutting down says 1001,
    /// "going away") and waits until it is closed. Pending requests fail with `.disconnected`.
    /// A peer that has not answered the close within `timeout` seconds (the WebSocket
    /// configuration's `closeTimeout` when nil) is dropped.
    public func close(code: CloseCode = .normalClosure, reason: String = "", timeout: Double? = nil) async {
        onLoop { $0.ws?.close(code: code, reason: reason, timeout: timeout) }
        _ = await closed()
    }

    /// Drops the connection at once, without a close handshake and without sending what is
    /// still queued: for when waiting on the peer is not an option (a shutdown past its
    /// deadline). Pending requests fail; `closed()` returns.
    public func abort(reason: String) {
        onLoop { $0.ws?.abort(.closed(code: .goingAway, reason: reason)) }
    }

    /// Waits until the connection is closed; returns the error that closed it, if any.
    public func closed() async -> BLIPError? {
        await withCheckedContinuation { c in
            onLoop { conn in
                if let s = conn.closedState.withLock({ $0 }) { c.resume(returning: s.clean ? nil : s.error) }
                else { conn.closeWaiters.append(c) }
            }
        }
    }

    /// A fatal protocol error: close with 1011, fail everything pending.
    func fail(_ error: BLIPError) {
        logger.warning("closing BLIP connection", metadata: ["error": "\(error)"])
        closedState.withLock { if $0 == nil { $0 = (error, false) } }
        closedOnLoop = closedOnLoop ?? error
        ws?.close(code: .internalError, reason: "\(error)")
        failPending(error)
    }

    private func failPending(_ error: BLIPError) {
        let p = pending.allValues
        pending.removeAll()
        for c in p { c(.failure(error)) }
        failStreams(error)
    }

    // MARK: WebSocketHandler

    public func webSocketDidOpen(_ connection: WebSocketConnection) {
        ws = connection
        subprotocol = connection.subprotocol
        openWaiter?(.success(()))
        openWaiter = nil
    }

    public func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        guard kind == .binary else {
            logger.warning("ignoring a text WebSocket message on a BLIP connection")
            return
        }
        let message: BLIPMessage?
        do { message = try session.receive(frame: payload) } catch { fail(error); return }
        if !openedStreams.isEmpty { dispatchOpenedStreams() }
        if let message { dispatch(message) }
        pump()
        // One read can hold dozens of requests. Replies are coalesced until the read callback
        // ends; writing them every `flushEvery` bytes instead lets the peer work on the first
        // replies while these are produced, rather than both sides taking turns.
        let queued = connection.bufferedByteCount
        if queued >= flushedAt + Self.flushEvery {
            connection.tcp.flush()
            flushedAt = connection.bufferedByteCount
        } else if queued < flushedAt {
            flushedAt = queued
        }
    }

    private func dispatch(_ m: BLIPMessage) {
        switch m.type {
        case .request:
            let request = BLIPIncomingRequest(message: m, connection: self)
            if let h = route(m.profile) {
                h(request)
            } else if !m.isNoReply {
                request.respondError(domain: "BLIP", code: 404, message: BLIPConstants.noHandlerMessage)
            }
        case .response, .error:
            guard let c = pending.removeValue(forKey: m.number) else { deliverStreamedResponse(m); return }
            if let e = m.error { c(.failure(.errorResponse(domain: e.domain, code: e.code, message: e.message))) }
            else { c(.success(m)) }
        default:
            break
        }
    }

    /// The handler for a profile (or the default one).
    private func route(_ profile: String?) -> Handler? {
        guard let profile else { return defaultHandler }
        if let r = lastRoute, r.profile == profile { return r.handler }
        guard let h = handlers[profile] ?? defaultHandler else { return nil }
        lastRoute = (profile, h)
        return h
    }

    public func webSocket(_ connection: WebSocketConnection, writabilityChanged writable: Bool) {
        if writable { pump() }
    }

    public func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {
        let state = closedState.withLock { s in
            if s == nil {
                let clean = error == nil && (code == .normalClosure || code == .goingAway)
                s = (error.map { .webSocket($0) } ?? .disconnected("closed (\(code)\(reason.isEmpty ? "" : ": \(reason)"))"), clean)
            }
            return s ?? (.disconnected("closed"), false)
        }
        let err = state.error
        closedOnLoop = err
        failPending(err)
        openWaiter?(.failure(err))
        openWaiter = nil
        ws = nil
        // Handlers capture their owners (a puller, a passive peer), which hold this connection:
        // dropped here, before anyone waiting for the close hears of it, a closed connection
        // and its owners are freed together.
        handlers = [:]
        defaultHandler = nil
        lastRoute = nil
        streamingHandlers = [:]
        let waiters = closeWaiters
        closeWaiters = []
        for w in waiters { w.resume(returning: state.clean ? nil : err) }
    }
}
