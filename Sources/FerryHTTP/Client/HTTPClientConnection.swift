import FerryNet

/// Receives one response's events from an `HTTPClientConnection`, on its loop.
protocol HTTPResponseSink: AnyObject {
    func responseHead(_ head: HTTPResponseHead)
    func responseBody(_ bytes: [UInt8])
    func responseEnd()
    func responseFailed(_ error: HTTPClientError)
}

/// One client connection: writes a request, decodes its response and hands the events to the
/// exchange's sink; between exchanges it waits in the pool. One exchange at a time (no
/// pipelining: CouchDB and most servers answer in order, but a failure mid-pipeline loses
/// every request behind it).
///
/// Safety of `@unchecked Sendable`: every member is used on `tcp.loop` only (the pool hands the
/// object between tasks, which reach it through `loop.execute`); `endpoint` is immutable.
final class HTTPClientConnection: ConnectionHandler, @unchecked Sendable {
    let endpoint: HTTPEndpoint
    private(set) var tcp: TCPConnection?
    private var decoder: HTTPResponseDecoder
    private var sink: (any HTTPResponseSink)?
    /// Whether any byte of the current exchange's response arrived.
    private var answered = false
    /// A body held back for `100 Continue` (`Expect: 100-continue`), and its wait.
    private var heldBody: [UInt8]?
    private var continueTimer: TimerHandle?
    private var timer: TimerHandle?
    private var timeout: Double = 60
    private var lastActivity = ContinuousClock.now
    /// Set once the connection may not carry another request.
    private(set) var isFinished = false
    /// Called on the loop when an exchange ended and the connection can carry another.
    var onReusable: ((HTTPClientConnection) -> Void)?
    /// Called on the loop once, when the connection closes.
    var onClosed: ((HTTPClientConnection) -> Void)?

    init(endpoint: HTTPEndpoint, limits: HTTPLimits) {
        self.endpoint = endpoint
        decoder = HTTPResponseDecoder(limits: limits)
    }

    var loop: EventLoop? { tcp?.loop }

    /// Takes over a connected (and, for `https`, TLS-started) TCP connection. On its loop.
    func start(_ connection: TCPConnection) {
        tcp = connection
        connection.start(handler: self)
    }

    /// Sends `bytes` (a whole request, or its head when `heldBody` waits for `100 Continue`:
    /// it goes on `100`, or after `continueWait` seconds without an answer, as RFC 9110 §10.1.1
    /// lets a client; a final answer first means it is never sent, and the connection, whose
    /// request is then incomplete, is not used again) and reports the response to `sink`. On
    /// the loop.
    func exchange(_ bytes: [UInt8], heldBody: [UInt8]? = nil, continueWait: Double = 1, method: String, timeout: Double,
                  maxBodySize: Int, sink: any HTTPResponseSink) {
        guard let tcp, !tcp.isClosed, !isFinished, self.sink == nil else {
            sink.responseFailed(.closedBeforeResponse)
            return
        }
        self.sink = sink
        self.timeout = timeout
        answered = false
        lastActivity = .now
        decoder.expectResponse(toMethod: method, maxBodySize: maxBodySize)
        armTimer(after: timeout)
        tcp.write(bytes)
        if let heldBody {
            self.heldBody = heldBody
            continueTimer = tcp.loop.schedule(after: continueWait) { [self] in
                continueTimer = nil
                sendHeldBody()
            }
        }
    }

    private func sendHeldBody() {
        guard let body = heldBody, let tcp else { return }
        heldBody = nil
        if let t = continueTimer { tcp.loop.cancel(t); continueTimer = nil }
        tcp.write(body)
    }

    /// Closes the connection; an exchange in progress fails with `error`. On the loop.
    func abort(_ error: HTTPClientError = .cancelled) {
        isFinished = true
        if let s = sink {
            sink = nil
            s.responseFailed(error)
        }
        tcp?.abort(nil)
    }

    private func armTimer(after seconds: Double) {
        guard let tcp else { return }
        if let t = timer { tcp.loop.cancel(t) }
        timer = tcp.loop.schedule(after: seconds) { [self] in
            self.timer = nil
            guard self.sink != nil else { return }
            // A timer per read would cost a heap operation per packet; instead the one timer
            // checks the time of the last read and re-arms for what is left.
            let quiet = (ContinuousClock.now - self.lastActivity) / .seconds(1)
            if quiet >= self.timeout { self.abort(.timedOut) } else { self.armTimer(after: self.timeout - quiet) }
        }
    }

    func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        guard sink != nil else {
            // Bytes nobody asked for: the connection is out of step; it is not used again.
            abort(.malformedResponse(HTTPError(status: 502, reason: "bytes from the server with no request outstanding")))
            return
        }
        answered = true
        lastActivity = .now
        let events: [HTTPResponseDecoder.Event]
        do throws(HTTPError) { events = try decoder.feed(UnsafeRawBufferPointer(bytes)) } catch {
            abort(.malformedResponse(error))
            return
        }
        deliver(events)
    }

    private func deliver(_ events: [HTTPResponseDecoder.Event]) {
        for e in events {
            guard let s = sink else { return }
            switch e {
            case .interim(let head):
                if head.status == 100 { sendHeldBody() }
            case .head(let head):
                if heldBody != nil {
                    // Answered before the body went: it never will, and the server may still
                    // wait for it, so this connection carries nothing more.
                    heldBody = nil
                    if let t = continueTimer, let tcp { tcp.loop.cancel(t); continueTimer = nil }
                    isFinished = true
                }
                s.responseHead(head)
            case .body(let bytes): s.responseBody(bytes)
            case .end:
                sink = nil
                if let t = timer, let tcp { tcp.loop.cancel(t); timer = nil }
                if !decoder.keepAlive { isFinished = true }
                // Back to the pool before the waiting task resumes, so its next request finds
                // this connection idle rather than opening another.
                if isFinished { tcp?.close() } else { onReusable?(self) }
                s.responseEnd()
            }
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}

    func connectionInputClosed(_ connection: TCPConnection) {
        isFinished = true
        // A body that runs until the close ends here.
        do throws(HTTPError) { deliver(try decoder.finish()) } catch {
            abort(.malformedResponse(error))
        }
    }

    func connectionClosed(_ connection: TCPConnection, error: NetError?) {
        isFinished = true
        if let t = timer { connection.loop.cancel(t); timer = nil }
        if let t = continueTimer { connection.loop.cancel(t); continueTimer = nil }
        if let s = sink {
            sink = nil
            if !answered {
                // A reset before any answer is how a server's idle close of a kept-alive
                // connection shows: the request may go again on another connection.
                switch error {
                case nil, .connectionReset?: s.responseFailed(.closedBeforeResponse)
                case let e?: s.responseFailed(.transport(e))
                }
            } else {
                s.responseFailed(.malformedResponse(HTTPError(status: 502, reason: "the connection closed in the middle of a response")))
            }
        }
        let closed = onClosed
        onClosed = nil
        onReusable = nil
        closed?(self)
    }
}
