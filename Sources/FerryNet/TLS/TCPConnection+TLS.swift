/// TLS on a `TCPConnection`: the connection keeps a `TLSSession` (sans-I/O, OpenSSL over memory
/// BIOs) between its socket and its handler. Ciphertext read from the socket is fed to the
/// session and the plaintext it yields goes to the handler; plaintext written by the handler is
/// gathered, sealed into records and the ciphertext queued on the connection's write queue.
/// Writes made before the handshake completes wait for it. Everything here runs on the
/// connection's loop, like the rest of `TCPConnection`; its state is stored in the class
/// (`tls`, `tlsEarlyWrites`, `tlsPlaintext`, `tlsHandshakeTimer`, `tlsTimeout`).
extension TCPConnection {
    /// The largest TLS record's plaintext.
    static let tlsRecordSize = 16 * 1024

    /// The TLS session, when the connection runs TLS: protocol version, cipher suite and the
    /// peer's certificate (once the handshake is complete).
    public var tlsSession: TLSSession? { tls }

    /// Runs TLS over this connection with `context`'s role; call before `start`. The handler
    /// sees only plaintext, and only after the handshake (and the client's certificate checks)
    /// succeeded; writes made earlier wait for it. A failed or timed-out handshake closes the
    /// connection with `.tls(reason)`. `serverName` (clients) is the host for SNI and
    /// certificate checks.
    public func startTLS(_ context: TLSContext, serverName: String? = nil) throws(NetError) {
        loop.preconditionInLoop()
        precondition(!started, "startTLS must come before start")
        do throws(TLSError) { tls = try TLSSession(context: context, serverName: serverName) } catch { throw .tls(error) }
        tlsTimeout = context.handshakeTimeout
    }

    /// Plaintext bytes written and not yet sealed into the write queue.
    var tlsBufferedByteCount: Int { tlsEarlyWrites.count + tlsPlaintext.count }

    /// From `start`: arms the handshake timeout and takes the first handshake step.
    func startTLSHandshake() {
        // Strong capture (see `handler`): the timer is cancelled when the handshake
        // completes or the connection closes, which releases it.
        tlsHandshakeTimer = loop.schedule(after: tlsTimeout) { [self] in
            guard let tls = self.tls, !tls.handshakeComplete else { return }
            self.closeNow(error: .tls(.handshakeTimedOut))
        }
        // A client speaks first (ClientHello); a server's first step just waits.
        processTLSInput()
    }

    /// From `resumeReading`: records already taken off the socket get no readiness event, so
    /// they are decrypted now.
    func resumeTLSInput() {
        guard let tls, tls.hasBufferedInput else { return }
        _ = loop.execute { [self] in
            guard !self.readingPaused, !self.isClosed else { return }
            self.processTLSInput()
            self.flushNow()
        }
    }

    /// From `close` and `shutdownOutput`: seals what was gathered and queues our `close_notify`
    /// once the handshake is complete. False if the session failed (the connection is then closed).
    func queueTLSCloseNotify() -> Bool {
        guard let tls, tls.handshakeComplete else { return true }
        guard sealTLSPlaintext() else { return false }
        tls.shutdown()
        moveTLSOutput()
        return true
    }

    /// Ciphertext read from the socket: decrypted for the handler.
    func receiveTLS(_ ciphertext: UnsafeRawBufferPointer) {
        guard let tls else { return }
        tls.feed(ciphertext)
        processTLSInput()
    }

    /// At the socket's EOF: a stream cut without `close_notify` is an error — it closes the
    /// connection during the handshake (returns false), and is reported at the close after it.
    func tlsInputEnded() -> Bool {
        guard let tls, !tls.receivedCloseNotify else { return true }
        guard tls.handshakeComplete else { closeNow(error: .tls(.unexpectedEOF)); return false }
        closeError = .tls(.unexpectedEOF)
        return true
    }

    /// From `closeNow`: the handshake timer and the plaintext not yet sealed are dropped.
    func discardTLSState() {
        if let t = tlsHandshakeTimer { loop.cancel(t); tlsHandshakeTimer = nil }
        tlsEarlyWrites = []
        tlsPlaintext = []
    }

    func encrypt(_ bytes: UnsafeRawBufferPointer, _ tls: TLSSession) {
        guard tls.handshakeComplete else {
            tlsEarlyWrites.append(contentsOf: bytes)
            afterEnqueue()
            return
        }
        if bytes.count >= Self.tlsRecordSize {
            // A record's worth or more: sealed straight from the caller's bytes, after what
            // was gathered before it, rather than copied into the buffer first.
            guard sealTLSPlaintext() else { return }
            do throws(TLSError) { try tls.write(bytes) } catch { failTLS(error); return }
            moveTLSOutput()
        } else {
            tlsPlaintext.append(contentsOf: bytes)
            if tlsPlaintext.count >= Self.tlsRecordSize { guard sealTLSPlaintext() else { return } }
        }
        afterEnqueue()
    }

    /// Encrypts the gathered plaintext into the write queue. False if the session failed
    /// (the connection is then closed).
    func sealTLSPlaintext() -> Bool {
        guard let tls, !tlsPlaintext.isEmpty else { return true }
        let sealed = tlsPlaintext.withUnsafeBytes { b in Result { () throws(TLSError) in try tls.write(b) } }
        tlsPlaintext.removeAll(keepingCapacity: tlsPlaintext.capacity <= 4 * Self.tlsRecordSize)
        if case .failure(let error) = sealed { failTLS(error); return false }
        moveTLSOutput()
        return true
    }

    /// Moves the session's ciphertext into the write queue.
    func moveTLSOutput() {
        tls?.takeOutput { pending.append($0) }
    }

    /// Advances the handshake, then decrypts every complete record for the handler.
    func processTLSInput() {
        guard let tls, !isClosed else { return }
        if !tls.handshakeComplete {
            do throws(TLSError) {
                guard try tls.advanceHandshake() else { moveTLSOutput(); if !inRead { flushNow() }; return }
            } catch {
                failTLS(error)
                return
            }
            if let t = tlsHandshakeTimer { loop.cancel(t); tlsHandshakeTimer = nil }
            if !tlsEarlyWrites.isEmpty {
                let early = tlsEarlyWrites
                tlsEarlyWrites = []
                let sent = early.withUnsafeBytes { b in Result { () throws(TLSError) in try tls.write(b) } }
                if case .failure(let error) = sent { failTLS(error); return }
            }
            if closeWhenFlushed { tls.shutdown() }
            moveTLSOutput()
        }
        let plain = loop.tlsPlaintextBuffer
        while !isClosed && !readingPaused {
            let result: TLSSession.ReadResult
            do throws(TLSError) { result = try tls.read(into: plain) } catch { failTLS(error); return }
            switch result {
            case .bytes(let n):
                handler?.connectionRead(self, UnsafeMutableRawBufferPointer(start: plain.baseAddress, count: n))
            case .wantMore:
                moveTLSOutput()
                return
            case .closed:
                moveTLSOutput()
                inputClosed()
                return
            }
        }
        moveTLSOutput()
    }

    /// Sends whatever alert OpenSSL queued (best effort, without waiting) and closes.
    func failTLS(_ error: TLSError) {
        moveTLSOutput()
        if !pending.isEmpty { _ = pending.flush(fd: fd) }
        closeNow(error: .tls(error))
    }
}
