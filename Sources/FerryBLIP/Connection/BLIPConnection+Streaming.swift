extension BLIPConnection {
    /// A loop-level handler for requests whose bodies arrive as streams: it gets the request
    /// (properties, flags, number; an empty body, and the means to answer) and the body.
    public typealias StreamingHandler = @Sendable (BLIPIncomingRequest, BLIPBodyStream) -> Void

    // MARK: Public API

    /// Routes requests whose `Profile` is `profile` to `handler` with their bodies as streams:
    /// it runs on the loop as soon as a request's properties have arrived, and the body
    /// follows at the reader's pace (requests that fit one frame come as a one-chunk stream).
    /// Replaces any handler for the profile.
    public func register(profile: String, streaming handler: @escaping StreamingHandler) {
        onLoop { conn in
            guard conn.closedOnLoop == nil else { return }
            conn.streamingHandlers[profile] = handler
            // One-frame requests take the ordinary route; this adapter keeps it untouched.
            conn.handlers[profile] = { [unowned conn] req in
                var head = req.message
                let body = head.body
                head.body = []
                let stream = BLIPBodyStream(connection: conn, body: IncomingBody(type: head.type, number: head.number, whole: body))
                handler(BLIPIncomingRequest(message: head, connection: conn), stream)
            }
            conn.lastRoute = nil
        }
    }

    /// Starts a request whose body is written piece by piece through the result's `body`;
    /// `request.body`, if not empty, is the body's start. The response is read with
    /// `response()` or `responseStream()`.
    public func startRequest(_ request: BLIPMessage) -> BLIPOutgoingRequest {
        let out = BLIPOutgoingRequest(connection: self, maxResponseSize: session.configuration.maxMessageSize)
        onLoop { conn in conn.startStreamedRequest(request, out) }
        return out
    }

    /// Sends a request whose body is the concatenation of `body`'s elements, read as the
    /// window allows, and waits for the whole response. If `body` throws, the request is
    /// abandoned (the connection closes, see `BLIPBodyWriter.abort`) and this throws
    /// `.aborted`.
    public func send<Body: AsyncSequence>(_ request: BLIPMessage, body: Body) async throws(BLIPError) -> BLIPMessage
    where Body.Element == [UInt8] {
        let out = startRequest(request)
        do {
            for try await piece in body { try await out.body.write(piece) }
        } catch let e as BLIPError {
            throw e
        } catch {
            out.body.abort(reason: "body source failed: \(error)")
            throw .aborted("body source failed: \(error)")
        }
        try await out.body.finish()
        return try await out.response()
    }

    /// Sends a request (its body whole) and returns the response once its properties have
    /// arrived, with its body as a stream.
    public func streamResponse(to request: BLIPMessage) async throws(BLIPError) -> BLIPIncomingStream {
        let out = startRequest(request)
        try await out.body.finish()
        return try await out.responseStream()
    }

    // MARK: Sending streamed bodies (on the loop)

    /// What requests and writes fail with once the connection is closed.
    var closedError: BLIPError? { closedOnLoop ?? closedState.withLock { $0?.error } }

    private func startStreamedRequest(_ request: BLIPMessage, _ out: BLIPOutgoingRequest) {
        if let e = closedError {
            out.body.state.failure = e
            out.slot.fulfil(.failure(e))
            return
        }
        let m = session.sendStreamed(request: request)
        out.body.state.message = m
        if request.isNoReply {
            let empty = IncomingBody(type: .response, number: m.number, whole: [])
            out.slot.fulfil(.success(BLIPIncomingStream(head: BLIPMessage(type: .response, number: m.number),
                                                        body: BLIPBodyStream(connection: self, body: empty))))
        } else {
            streamingPending.insert(out.slot, for: m.number)
        }
        pump()
    }

    func startStreamedResponse(_ reply: BLIPMessage, to number: UInt64, _ state: BLIPBodyWriter.State) {
        if let e = closedError { state.failure = e; return }
        do {
            state.message = try session.sendStreamed(response: reply, to: number)
        } catch {
            state.failure = error
            return
        }
        pump()
    }

    func streamWrite(_ bytes: [UInt8], _ state: BLIPBodyWriter.State, _ done: @escaping (Result<Void, BLIPError>) -> Void) {
        if let e = state.failure ?? closedError { done(.failure(e)); return }
        guard let m = state.message, let queue = m.streamed, !state.finished else {
            done(.failure(.invalidRequest("the body was already finished")))
            return
        }
        session.append(bytes, to: m)
        pump()
        if queue.count > session.configuration.streamWindow {
            state.waiter = done
            blockedWriters.append(state)
        } else {
            done(.success(()))
        }
    }

    func streamFinish(_ state: BLIPBodyWriter.State) -> Result<Void, BLIPError> {
        if let e = state.failure ?? closedError { return .failure(e) }
        guard let m = state.message else { return .failure(.invalidRequest("the message was not started")) }
        if !state.finished {
            state.finished = true
            session.finish(m)
            pump()
        }
        return .success(())
    }

    func abortStream(_ state: BLIPBodyWriter.State, reason: String) {
        guard !state.finished, state.failure == nil, closedError == nil else { return }
        let number = state.message.map { "#\($0.number)" } ?? "(unstarted)"
        state.failure = .aborted(reason)
        fail(.aborted("\(number): \(reason)"))
    }

    /// After frames went out: writers whose backlog is down to half the window continue.
    func resumeDrainedWriters() {
        let limit = session.configuration.streamWindow / 2
        var still: [BLIPBodyWriter.State] = []
        for state in blockedWriters {
            if let waiter = state.waiter, (state.message?.streamed?.count ?? 0) <= limit {
                state.waiter = nil
                waiter(.success(()))
            } else if state.waiter != nil {
                still.append(state)
            }
        }
        blockedWriters = still
    }

    // MARK: Receiving streamed bodies (on the loop)

    /// The session asks, once a multi-frame message's properties are in: stream its body?
    /// Requests are streamed when their profile has a streaming handler, responses when their
    /// request was sent for a streamed response (ERR replies always arrive whole).
    func openIncomingStream(_ head: BLIPMessage) -> IncomingBody? {
        switch head.type {
        case .request:
            guard let profile = head.profile, let handler = streamingHandlers[profile] else { return nil }
            let body = makeIncomingBody(head)
            openedStreams.append((head, body, handler))
            return body
        case .response:
            guard let slot = streamingPending.removeValue(forKey: head.number) else { return nil }
            let body = makeIncomingBody(head)
            slot.fulfil(.success(BLIPIncomingStream(head: head, body: BLIPBodyStream(connection: self, body: body))))
            return body
        default:
            return nil
        }
    }

    private func makeIncomingBody(_ head: BLIPMessage) -> IncomingBody {
        let body = IncomingBody(type: head.type, number: head.number, window: session.configuration.streamWindow)
        body.onPressure = { [unowned self] on in self.streamPressure(on) }
        activeBodies.removeAll { $0.finished || $0.discarding || $0.failure != nil }
        activeBodies.append(body)
        return body
    }

    /// Runs the streaming handlers of requests whose streams opened during the last read.
    func dispatchOpenedStreams() {
        let opened = openedStreams
        openedStreams = []
        for (head, body, handler) in opened {
            handler(BLIPIncomingRequest(message: head, connection: self), BLIPBodyStream(connection: self, body: body))
        }
    }

    /// A whole response (one frame, or an ERR) to a request sent for a streamed response.
    func deliverStreamedResponse(_ m: BLIPMessage) {
        guard let slot = streamingPending.removeValue(forKey: m.number) else { return }
        if let e = m.error {
            slot.fulfil(.failure(.errorResponse(domain: e.domain, code: e.code, message: e.message)))
            return
        }
        var head = m
        head.body = []
        let body = IncomingBody(type: m.type, number: m.number, whole: m.body)
        slot.fulfil(.success(BLIPIncomingStream(head: head, body: BLIPBodyStream(connection: self, body: body))))
    }

    /// A reader asks for the next chunk: it gets one now, or when it arrives.
    func nextChunk(of body: IncomingBody, _ deliver: @escaping (Result<[UInt8]?, BLIPError>) -> Void) {
        if let chunk = body.take() {
            deliver(.success(chunk))
            // The reader caught up: the ACK it held back lets the sender go on.
            if body.ackWithheld && !body.isBehind && session.sendWithheldAck(for: body) { pump() }
            return
        }
        if let e = body.failure { deliver(.failure(e)); return }
        if body.finished || body.discarding { deliver(.success(nil)); return }
        body.waiter = deliver
        if body.ackWithheld && session.sendWithheldAck(for: body) { pump() }
    }

    /// The reader is gone: drop what is buffered and let the sender finish.
    func discardBody(_ body: IncomingBody) {
        guard !body.finished, body.failure == nil, !body.discarding else { return }
        body.discard()
        if session.sendWithheldAck(for: body) { pump() }
    }

    /// A body's reader fell far behind (`on`) or caught up: reading pauses while any is.
    func streamPressure(_ on: Bool) {
        readPausers += on ? 1 : -1
        guard !userPausedReading else { return }
        if on && readPausers == 1 { ws?.pauseReading() } else if !on && readPausers == 0 { ws?.resumeReading() }
    }

    /// The connection ended: streams in progress end with `error`.
    func failStreams(_ error: BLIPError) {
        let slots = streamingPending.allValues
        streamingPending.removeAll()
        for s in slots { s.fulfil(.failure(error)) }
        let bodies = activeBodies
        activeBodies = []
        for b in bodies { b.fail(error) }
        openedStreams = []
        let writers = blockedWriters
        blockedWriters = []
        for w in writers {
            w.failure = w.failure ?? error
            if let waiter = w.waiter { w.waiter = nil; waiter(.failure(error)) }
        }
    }
}

extension BLIPIncomingRequest {
    /// Starts a response whose body is written piece by piece through the returned writer
    /// (then `finish()`); it may start before the request's own body has all arrived. If the
    /// request wants no response or was already answered, the writer's calls throw
    /// `.invalidRequest`.
    public func respondStreaming(properties: BLIPProperties = BLIPProperties(), compressed: Bool = false) -> BLIPBodyWriter {
        let writer = BLIPBodyWriter(connection: connection)
        let reply = BLIPMessage(type: .response, flags: compressed ? .compressed : [], properties: properties)
        let number = message.number
        let state = writer.state
        connection.onLoop { conn in conn.startStreamedResponse(reply, to: number, state) }
        return writer
    }
}
