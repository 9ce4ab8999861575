import FerryHTTP
import FerryNet
import FerryWebSocket
import Logging

/// Serves HTTP/1.1 on one accepted connection from its first byte (Protocol/http.md): decodes
/// requests with `HTTPRequestDecoder`, answers each through `respond` off the loop, and writes
/// the answers in request order (pipelining), whole or chunked. A request that asks for a
/// WebSocket (`Upgrade: websocket`) is upgraded once every earlier answer is written: the
/// head, parsed here once, and the bytes after it go to the WebSocket listener, which checks
/// the handshake and runs BLIP on the connection. Any other `Upgrade` (h2c) is ignored, as RFC
/// 9110 §7.8 allows, and the request served as HTTP/1.1. Loop-confined: every method runs on
/// the connection's loop thread.
final class HTTPServerConnection: ConnectionHandler {
    /// Answers one request; runs in a task, off the loop.
    typealias Responder = @Sendable (RESTRequest) async -> RESTResponse
    /// Upgrades the connection to WebSocket: the upgrade request's head and the bytes after it.
    typealias Upgrader = (HandedOffConnection, FerryHTTP.HTTPRequestHead, [UInt8]) -> Void

    /// How long a connection may sit with no request in progress, or a request may take to
    /// arrive, before it is closed.
    struct Timeouts {
        var idle: Double = 60
        var request: Double = 30
        /// How long the first request's head may take to arrive (the WebSocket handshake
        /// timeout: the first request is often the upgrade).
        var firstRequest: Double = 10
        /// How long a streamed answer may wait for the client to read before the connection is
        /// dropped (a reader that stopped, or reads a byte a second).
        var slowReader: Double = 60
    }

    private let handoff: HandedOffConnection
    private var tcp: TCPConnection { handoff.tcp }
    private var decoder: HTTPRequestDecoder
    private let respond: Responder
    private let upgrader: Upgrader
    private let timeouts: Timeouts
    private let logger: Logger
    private let peerCertificate: TLSCertificate?
    private let tracker: HTTPConnectionTracker?
    private let bodies: RequestBodyBudget?
    private let uploads: UploadRateLimiter?
    /// Reading is paused until the address's upload rate allows more.
    private var rateLimited = false
    /// The client's host, what `bodies` counts by.
    private let address: String

    /// The request being read.
    private var head: FerryHTTP.HTTPRequestHead?
    private var body: [UInt8] = []
    /// Numbering of requests and of the next answer to write, for pipelining.
    private var nextRequest = 0
    private var nextToWrite = 0
    /// Answers ready to write, by request number, with when each request was read (for its
    /// access-log line).
    private var finished: [Int: (method: String, target: String, keepAlive: Bool, response: RESTResponse, start: ContinuousClock.Instant)] = [:]
    /// The streamed answer's access-log line, written when it ends: its request, and the
    /// body bytes sent so far.
    private var streamLog: (method: String, target: String, status: Int, user: String?, start: ContinuousClock.Instant, bytes: Int)?
    private let accessLog: AccessLog?
    /// A streamed answer is being written: later answers wait for its end.
    private var streaming: Task<Void, Never>?
    /// The streamed answer is a feed (`RESTResponse.isFeed`): it ends when the client's input does.
    private var streamingFeed = false
    /// No more requests are read (an error, `Connection: close` or an upgrade is pending).
    private var stopReading = false
    /// An upgrade request waiting for earlier answers to be written.
    private var pendingUpgrade: FerryHTTP.HTTPRequestHead?
    /// Whether a request head has arrived yet (before it, `firstRequest` bounds the wait).
    private var sawRequest = false
    /// The client closed its sending side: close once every answer owed is written.
    private var inputClosed = false
    private var activity = 0
    private var timer: TimerHandle?
    private var closed = false
    /// The streamed answer's next piece waits for the output buffer to drain below its low
    /// mark: resumed with true then, false when the connection ends.
    private var writeWaiter: CheckedContinuation<Bool, Never>?
    /// Drops a client that leaves a streamed answer unread for `timeouts.slowReader`.
    private var slowReaderTimer: TimerHandle?

    init(handoff: HandedOffConnection, limits: HTTPLimits, timeouts: Timeouts, logger: Logger,
         tracker: HTTPConnectionTracker? = nil, bodies: RequestBodyBudget? = nil, uploads: UploadRateLimiter? = nil,
         accessLog: AccessLog? = nil, respond: @escaping Responder, upgrader: @escaping Upgrader) {
        self.handoff = handoff
        decoder = HTTPRequestDecoder(limits: limits)
        self.respond = respond
        self.upgrader = upgrader
        self.timeouts = timeouts
        self.logger = logger
        peerCertificate = handoff.tcp.tlsSession?.peerCertificate
        self.tracker = tracker
        self.bodies = bodies
        self.uploads = uploads
        self.accessLog = accessLog
        address = handoff.tcp.remoteAddress?.host ?? ""
    }

    /// Takes over the connection and reads what the listener already read.
    func start() {
        tcp.start(handler: self)
        // Answers are computed off the loop: a client that half-closes after its requests
        // still gets them; `connectionInputClosed` closes once they are written.
        tcp.closesWhenInputEnds = false
        if let tracker {
            let me = UncheckedTransfer(self)  // Confinement: unboxed only on the loop.
            let loop = tcp.loop
            tracker.opened(ObjectIdentifier(self)) { loop.execute { me.value.shutDown() } }
        }
        armTimer()
    }

    private var inProgress: Bool { nextToWrite < nextRequest || head != nil || !decoder.isIdle }

    private func armTimer() {
        guard !closed else { return }
        let seen = activity
        let delay = !sawRequest ? timeouts.firstRequest : inProgress ? timeouts.request : timeouts.idle
        timer = tcp.loop.schedule(after: delay) { [self] in
            timer = nil
            guard !closed else { return }
            if activity != seen || streaming != nil || nextToWrite < nextRequest { armTimer(); return }
            if head != nil || !decoder.isIdle {
                fail(HTTPError(status: 408, reason: "the request took too long to arrive"))
            } else {
                closeGracefully()
            }
        }
    }

    func connectionRead(_ tcp: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        tracker?.read(bytes.count)
        guard !stopReading else { return }
        activity &+= 1
        var events: [HTTPRequestDecoder.Event]
        do {
            events = try decoder.feed(UnsafeRawBufferPointer(bytes))
            handle(events)
            // Another protocol than WebSocket asked for (h2c): declined, served as HTTP/1.1.
            while decoder.awaitsUpgradeDecision && pendingUpgrade == nil && !stopReading {
                events = try decoder.declineUpgrade()
                handle(events)
            }
        } catch {
            fail(error)
        }
    }

    private func handle(_ events: [HTTPRequestDecoder.Event]) {
        for event in events {
            guard !stopReading else { return }
            switch event {
            case .head(let h):
                sawRequest = true
                if h.tokens("Upgrade").contains(where: { $0.caseInsensitiveEquals("websocket") }) {
                    // The upgrade runs once the answers to the earlier requests are out.
                    stopReading = true
                    pendingUpgrade = h
                    writeReady()
                    return
                }
                head = h
                body = []
                if h.expectsContinue { send(HTTPResponseEncoder.continueResponse) }
            case .body(let piece):
                if let bodies, !bodies.take(piece.count, held: body.count, address: address) {
                    // Answered after the requests before it; the rest of the body is not read.
                    bodies.release(body.count, address: address)
                    body = []
                    head = nil
                    fail(HTTPError(status: 503, reason: "the server holds too many request bodies now; retry later"))
                    return
                }
                body += piece
                paceUpload(piece.count)
            case .end:
                guard let h = head else { continue }
                head = nil
                dispatch(h, body)
                body = []
            }
        }
    }

    /// Stops reading for as long as `count` more body bytes put this address over its upload
    /// rate (`UploadRateLimiter`).
    private func paceUpload(_ count: Int) {
        guard let uploads, !rateLimited else { return }
        let wait = uploads.consume(count, address: address)
        guard wait > 0 else { return }
        rateLimited = true
        tcp.pauseReading()
        _ = tcp.loop.schedule(after: wait) { [self] in
            rateLimited = false
            if !closed && !readingPaused { tcp.resumeReading() }
        }
    }

    private func dispatch(_ h: FerryHTTP.HTTPRequestHead, _ body: [UInt8]) {
        // The body's bytes stay counted until its request is answered (`runNext`).
        if !body.isEmpty { heldBodies[nextRequest] = body.count }
        let n = nextRequest
        nextRequest += 1
        let start = ContinuousClock.now
        if !h.keepAlive { stopReading = true }
        guard let request = RESTRequest(head: h, body: body, remoteAddress: tcp.remoteAddress, peerCertificate: peerCertificate,
                                        isSecure: tcp.tlsSession != nil) else {
            queued.append((n, h, nil, start))
            runNext()
            return
        }
        queued.append((n, h, request, start))
        runNext()
    }

    /// Requests read but not yet answered, run one at a time: a pipelined `GET` after a `PUT`
    /// must see that write (RFC 9112 §9.3.2: a server processes pipelined requests in order).
    private var queued: [(n: Int, head: FerryHTTP.HTTPRequestHead, request: RESTRequest?, start: ContinuousClock.Instant)] = []
    /// Body bytes counted in `bodies` per request not yet answered.
    private var heldBodies: [Int: Int] = [:]

    private func releaseBody(of n: Int) {
        if let held = heldBodies.removeValue(forKey: n) { bodies?.release(held, address: address) }
    }
    private var running = false
    /// The task answering the running request: cancelled when the client goes away, which
    /// ends a longpoll's wait (routes that do not wait ignore it).
    private var runningTask: Task<Void, Never>?

    private func runNext() {
        guard !running, !closed, !queued.isEmpty else { return }
        let (n, h, request, start) = queued.removeFirst()
        guard let request else {
            releaseBody(of: n)
            finish(n, h, RESTError.badRequest("the request target is not a path with valid escapes").response, start: start)
            runNext()
            return
        }
        running = true
        let respond = self.respond
        // Confinement (UncheckedTransfer rule 1): the connection is used only in the closure
        // that `loop.execute` runs on its own loop.
        let me = UncheckedTransfer(self)
        let loop = tcp.loop
        runningTask = Task {
            let response = await respond(request)
            loop.execute {
                me.value.releaseBody(of: n)
                me.value.running = false
                me.value.runningTask = nil
                me.value.finish(n, h, response, start: start)
                me.value.runNext()
            }
        }
        if inputClosed { runningTask?.cancel() }
    }

    private func finish(_ n: Int, _ h: FerryHTTP.HTTPRequestHead, _ response: RESTResponse, start: ContinuousClock.Instant) {
        guard !closed else {
            if case .stream = response.body {} // dropped with the response: its producer ends
            return
        }
        finished[n] = (h.method, h.target, h.keepAlive, response, start)
        writeReady()
    }

    /// Writes the answers that are next in order, up to a streamed one.
    private func writeReady() {
        while streaming == nil, !closed, let (method, target, keepAlive, response, start) = finished.removeValue(forKey: nextToWrite) {
            nextToWrite += 1
            activity &+= 1
            var headers = response.headers
            headers.append(("Date", HTTPDate.now()))
            if !keepAlive { headers.append(("Connection", "close")) }
            let head = HTTPResponseHead(status: response.status, headers: headers)
            switch response.body {
            case .bytes(let bytes):
                send(HTTPResponseEncoder.encode(head, body: bytes, head: method == "HEAD"))
                if let accessLog {
                    accessLog.record(method: method, target: target, status: response.status, bytes: method == "HEAD" ? 0 : bytes.count,
                                     since: start, user: response.user, address: address)
                }
                if !keepAlive { closeGracefully(); closed = true; return }
            case .stream(let pieces):
                send(HTTPResponseEncoder.encodeChunkedHead(head))
                if accessLog != nil { streamLog = (method, target, response.status, response.user, start, 0) }
                if method == "HEAD" {
                    logStreamEnd()
                    // The head only; dropping the stream ends its producer.
                    _ = pieces
                    if !keepAlive { closeGracefully(); closed = true; return }
                    continue
                }
                let me = UncheckedTransfer(self)  // Confinement: unboxed only on the loop.
                let loop = tcp.loop
                streamingFeed = response.isFeed
                // Pieces are pulled one at a time, each once the previous one fits in the
                // output buffer: a slow reader slows its producer instead of filling memory.
                streaming = Task {
                    for await piece in pieces {
                        if Task.isCancelled { break }
                        let more = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                            loop.execute { me.value.writeChunk(piece, then: c) }
                        }
                        if !more { break }
                    }
                    loop.execute { me.value.endStream(keepAlive: keepAlive) }
                }
                // A feed asked for before the client closed its side, answered after: it is gone.
                if inputClosed && response.isFeed { streaming?.cancel() }
            }
        }
        guard streaming == nil, nextToWrite == nextRequest, !closed else { return }
        if let request = pendingUpgrade {
            pendingUpgrade = nil
            if let t = timer { tcp.loop.cancel(t); timer = nil }
            closed = true
            tracker?.left(ObjectIdentifier(self))
            // The WebSocket side reads from here on, whatever paused this side's reading.
            if readingPaused || rateLimited { tcp.resumeReading() }
            // What the client sent after the head belongs to the WebSocket.
            upgrader(handoff, request, decoder.takeUnread())
        } else if inputClosed {
            closeGracefully()
        }
    }

    /// Writes and counts. Past the output buffer's high mark no more requests are read
    /// until it drains: a client that pipelines requests without reading the answers stops
    /// being served instead of growing the buffer.
    private func send(_ bytes: [UInt8]) {
        tracker?.wrote(bytes.count)
        tcp.write(bytes)
        if !tcp.isWritable && !readingPaused {
            readingPaused = true
            tcp.pauseReading()
        }
    }

    private var readingPaused = false

    /// Closes once the answers owed are written, or drops the connection if the client has
    /// not read them within `timeouts.slowReader`: an orderly close must not wait forever on
    /// a client that stopped reading.
    private func closeGracefully() {
        tcp.close()
        let tcp = self.tcp
        _ = tcp.loop.schedule(after: timeouts.slowReader) { if !tcp.isClosed { tcp.abort() } }
    }

    /// The daemon is stopping: no more requests; the connection closes now, whatever it was
    /// doing (a feed that never ends would otherwise keep it).
    private func shutDown() {
        guard !closed else { return }
        stopReading = true
        closeGracefully()
    }

    private func writeChunk(_ piece: [UInt8], then next: CheckedContinuation<Bool, Never>) {
        guard !closed else { next.resume(returning: false); return }
        if !piece.isEmpty {
            send(HTTPResponseEncoder.chunk(piece))
            streamLog?.bytes += piece.count
        }
        guard !tcp.isWritable else { next.resume(returning: true); return }
        writeWaiter = next
        slowReaderTimer = tcp.loop.schedule(after: timeouts.slowReader) { [self] in
            slowReaderTimer = nil
            guard !closed, writeWaiter != nil else { return }
            logger.info("dropping a client that stopped reading its answer", metadata: ["peer": "\(tcp.remoteAddress.map { "\($0)" } ?? "?")"])
            tcp.abort()
        }
    }

    /// The streamed answer may go on (the output buffer drained) or must stop (closed).
    private func resumeWriter(_ more: Bool) {
        if let t = slowReaderTimer { tcp.loop.cancel(t); slowReaderTimer = nil }
        writeWaiter?.resume(returning: more)
        writeWaiter = nil
    }

    private func endStream(keepAlive: Bool) {
        guard !closed else { return }
        streaming = nil
        send(HTTPResponseEncoder.lastChunk)
        logStreamEnd()
        if !keepAlive { closeGracefully(); closed = true; return }
        writeReady()
    }

    /// Writes the streamed answer's access-log line (at its end, or when the connection ends it).
    private func logStreamEnd() {
        guard let s = streamLog, let accessLog else { return }
        streamLog = nil
        accessLog.record(method: s.method, target: s.target, status: s.status, bytes: s.bytes, since: s.start, user: s.user, address: address)
    }

    /// Answers a request that broke the protocol (after the answers before it) and closes:
    /// where the next request would start is unknown.
    private func fail(_ error: HTTPError) {
        stopReading = true
        logger.debug("bad HTTP request", metadata: ["status": "\(error.status)", "reason": "\(error.reason)"])
        let n = nextRequest
        nextRequest += 1
        var failed = FerryHTTP.HTTPRequestHead.closing
        failed.keepAlive = false
        finish(n, failed, RESTError(error.status, error.status == 413 ? "too_large" : "bad_request", error.reason).response, start: .now)
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {
        guard writable else { return }
        if readingPaused && !closed {
            readingPaused = false
            if !rateLimited { tcp.resumeReading() }
        }
        resumeWriter(true)
    }

    func connectionInputClosed(_ connection: TCPConnection) {
        // The client sent everything; answers still owed are written, then the connection closes.
        stopReading = true
        inputClosed = true
        // A feed waits for changes nobody will read: a client that closed its side is gone
        // in practice (an HTTP client half-closing and still reading a feed is not one we
        // know), and it would otherwise hold the connection until the next commit or the
        // timeout. The wait ends now; its answer (a longpoll's page, a feed's last line) is
        // written and the connection closes. Other requests ignore the cancellation.
        runningTask?.cancel()
        if streamingFeed { streaming?.cancel() }
        writeReady()
    }

    func connectionClosed(_ connection: TCPConnection, error: NetError?) {
        closed = true
        tracker?.left(ObjectIdentifier(self))
        runningTask?.cancel()
        streaming?.cancel()
        streaming = nil
        logStreamEnd()
        resumeWriter(false)
        finished = [:]
        // Bodies of requests that will not run now, and the one being read; the running
        // request's is given back when it ends.
        for q in queued { releaseBody(of: q.n) }
        queued = []
        if !body.isEmpty { bodies?.release(body.count, address: address); body = [] }
        if let t = timer { tcp.loop.cancel(t); timer = nil }
        handoff.finished()
    }
}

extension FerryHTTP.HTTPRequestHead {
    /// A stand-in head for answering a request that could not be read.
    static var closing: Self {
        var decoder = HTTPRequestDecoder()
        let events = (try? decoder.feed(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))) ?? []
        for case .head(let h) in events { return h }
        preconditionFailure("a constant request head decodes")
    }
}
