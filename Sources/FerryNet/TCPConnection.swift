import CFerrySystem
#if canImport(Glibc)
import Glibc
#endif

/// Receives the events of one TCP connection. Every method is called on the connection's
/// event loop thread.
public protocol ConnectionHandler: AnyObject {
    /// Bytes arrived. The buffer is borrowed (the loop's shared read buffer) and valid only
    /// during the call; the handler may modify it in place (e.g. to unmask) and must copy what
    /// it keeps.
    func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer)
    /// The write queue crossed a watermark: `false` above the high mark (stop producing),
    /// `true` once it has drained below the low mark.
    func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool)
    /// The peer closed its sending side (EOF). The connection closes after pending writes
    /// flush unless the handler closes it first.
    func connectionInputClosed(_ connection: TCPConnection)
    /// The connection is closed; `error` is nil for an orderly close. Called exactly once.
    func connectionClosed(_ connection: TCPConnection, error: NetError?)
}

/// Options for a TCP connection.
public struct ConnectionOptions: Sendable {
    /// Above this many queued bytes the connection reports not writable.
    public var writeHighWaterMark = 256 * 1024
    /// Below this many queued bytes it reports writable again.
    public var writeLowWaterMark = 64 * 1024
    /// Disables Nagle's algorithm (the default: messages are latency-sensitive).
    public var noDelay = true
    /// Creates the default options.
    public init() {}
}

/// A non-blocking TCP connection owned by one event loop. All methods must be called on that
/// loop; use `loop.execute` from elsewhere.
///
/// Safety of `@unchecked Sendable`: instances are handed between threads only to be used on
/// `loop` (every mutating entry point asserts `preconditionInLoop`).
///
/// TLS is driven by the extension in `TLS/TCPConnection+TLS.swift`; the members it shares with
/// this file are internal instead of private (`fd`, `pending`, `started`, `readingPaused`,
/// `closeWhenFlushed`, `inRead`, `closeError`, the `tls…` state, `afterEnqueue`, `flushNow`,
/// `inputClosed`, `closeNow`). Nothing outside `TCPConnection` uses them.
public final class TCPConnection: Selectable, @unchecked Sendable {
    /// The loop that owns this connection.
    public let loop: EventLoop
    // `@exclusivity(unchecked)` on the scalar state and object references below: Swift checks
    // exclusive access to a class's stored properties at run time (a runtime call and a
    // thread-local lookup per access), several per message here — ~1.6 % of a 32-byte WebSocket
    // echo's server time. Safe: every access happens on the owning loop's thread, and none of
    // these is borrowed across a call (a handler is loaded, then called; values are copied).
    // The buffers that are borrowed across calls (`tlsEarlyWrites`, `tlsPlaintext`) keep the
    // check. The debug test suite ran with all checks on before they were turned off.
    /// The handler that receives this connection's events; held until the connection closes
    /// (then released, which breaks the handler → connection → handler cycle). A strong
    /// reference, not `weak`: a weakly referenced object gets a side table, and then every
    /// retain and release of it, on every message, takes the runtime's slow path.
    @exclusivity(unchecked) public private(set) var handler: ConnectionHandler?
    @exclusivity(unchecked) var fd: Int32
    /// The write queue, touched several times per message. It lives behind a pointer and is
    /// reached through addressors because a stored property of a class gets a dynamic
    /// exclusivity check (a runtime call and a thread-local lookup) on every mutating access;
    /// the queue is loop-confined, so those checks can never fire.
    private let pendingStorage: UnsafeMutablePointer<PendingWrites> = {
        let p = UnsafeMutablePointer<PendingWrites>.allocate(capacity: 1)
        p.initialize(to: PendingWrites())
        return p
    }()
    var pending: PendingWrites {
        unsafeAddress { UnsafePointer(pendingStorage) }
        unsafeMutableAddress { pendingStorage }
    }
    private let options: ConnectionOptions
    @exclusivity(unchecked) var started = false
    @exclusivity(unchecked) var readingPaused = false
    /// Out of epoll while paused: the peer hung up and HUP/ERR (always reported) would spin.
    @exclusivity(unchecked) private var parkedAfterHangup = false
    @exclusivity(unchecked) private var wantWritable = false
    @exclusivity(unchecked) private var writableFlag = true
    @exclusivity(unchecked) var closeWhenFlushed = false
    @exclusivity(unchecked) var inRead = false
    /// Inside `write`: a writability change found there is reported from the loop afterwards.
    @exclusivity(unchecked) private var inWrite = false
    /// Inside the handler's "writable again" callback from `flushNow`: writes are queued and
    /// flushed together once it returns, as inside a read callback.
    @exclusivity(unchecked) private var inWritabilityCallback = false
    /// Something was written during that callback (so there is something new to flush).
    @exclusivity(unchecked) private var wroteInWritabilityCallback = false
    /// The error reported at an otherwise orderly close (a TLS stream cut without close_notify).
    @exclusivity(unchecked) var closeError: NetError?

    // The TLS layer's state (TLS/TCPConnection+TLS.swift drives it).
    /// The TLS layer, when `startTLS` was called: ciphertext on the socket, plaintext to the handler.
    @exclusivity(unchecked) var tls: TLSSession?
    /// Plaintext written before the TLS handshake finished, sent once it has.
    var tlsEarlyWrites: [UInt8] = []
    /// Plaintext written since the last flush, sealed into TLS records when the connection
    /// flushes (or a record's worth has gathered): a writer that hands over a message in
    /// pieces (a WebSocket header, then the payload; BLIP's three parts) gets full records
    /// instead of one record — and one AEAD operation — per piece.
    var tlsPlaintext: [UInt8] = []
    var tlsHandshakeTimer: TimerHandle?
    /// Seconds the handshake may take (the context's `handshakeTimeout`).
    var tlsTimeout = 10.0
    /// Whether the connection closes by itself once the peer has closed its sending side and
    /// every queued byte is written (the default). A handler that still owes answers computed
    /// elsewhere (an HTTP server's to a client that sent its requests and then half-closed,
    /// RFC 9112 §9.6) sets it to false and closes the connection itself. Loop thread only.
    public var closesWhenInputEnds = true
    /// True once the connection is closed.
    @exclusivity(unchecked) public private(set) var isClosed = false
    /// The peer's address, when known.
    public let remoteAddress: SocketAddress?
    /// The local address, when known.
    public let localAddress: SocketAddress?

    init(fd: Int32, loop: EventLoop, options: ConnectionOptions) {
        self.fd = fd
        self.loop = loop
        self.options = options
        remoteAddress = Socket.peerAddress(fd)
        localAddress = Socket.localAddress(fd)
        if options.noDelay { Socket.setNoDelay(fd) }
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
        pendingStorage.deinitialize(count: 1)
        pendingStorage.deallocate()
    }

    /// Bytes queued for writing.
    public var bufferedByteCount: Int { pending.byteCount + tlsBufferedByteCount }

    /// Whether the write queue is below its high watermark.
    public var isWritable: Bool { writableFlag }

    /// Starts delivering events to `handler`, which the connection retains until it closes.
    public func start(handler: ConnectionHandler) {
        loop.preconditionInLoop()
        precondition(!started, "start called twice")
        started = true
        self.handler = handler
        do {
            try loop.register(fd: fd, self, readable: true, writable: !pending.isEmpty)
        } catch {
            closeNow(error: error)
            return
        }
        // A strong capture (see `handler`): closeNow removes the hook, ending the cycle.
        loop.onShutdown(self) { self.closeNow(error: .loopShutDown) }
        if tls != nil {
            startTLSHandshake()
            return
        }
        if !pending.isEmpty { flushNow() }
    }

    /// Hands the connection to another handler (after a protocol upgrade, for instance).
    public func replaceHandler(_ newHandler: ConnectionHandler) {
        loop.preconditionInLoop()
        if !isClosed { handler = newHandler }
    }

    /// Queues bytes (copied) for writing; flushed at the end of the current read callback or
    /// at once when not in one. Writes of 64 KiB or more go to the socket at once (behind
    /// what is queued) and only what it does not take is copied.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.preconditionInLoop()
        guard !isClosed else { return }
        inWrite = true
        defer { inWrite = false }
        if let tls { encrypt(bytes, tls); return }
        if bytes.count >= Self.writeThroughSize && started {
            // Large: straight to the socket (behind what is queued), copying only the rest.
            if let e = pending.flush(fd: fd, then: bytes) { closeNow(error: .from(errno: e, operation: "sendmsg")); return }
            afterEnqueue()
            return
        }
        pending.append(bytes)
        afterEnqueue()
    }

    /// Writes at least this large skip the write queue when the socket takes them.
    static let writeThroughSize = 64 * 1024

    /// Queues a chunk for writing (see `write(_: UnsafeRawBufferPointer)`).
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    func afterEnqueue() {
        if writableFlag && bufferedByteCount > options.writeHighWaterMark {
            writableFlag = false
            handler?.connectionWritabilityChanged(self, writable: false)
        }
        if inWritabilityCallback { wroteInWritabilityCallback = true }
        guard !inRead && !inWritabilityCallback && started else { return }
        if loop.runningTasks {
            if !flushDeferred { flushDeferred = true; loop.deferFlush(self) }
        } else {
            flushNow()
        }
    }

    /// Whether the loop will flush this connection when its current batch of tasks ends.
    @exclusivity(unchecked) private var flushDeferred = false

    /// Called by the loop at the end of a batch of tasks in which this connection was written.
    func flushDeferredWrites() {
        flushDeferred = false
        flushNow()
    }

    /// Stops reading from the socket (inbound backpressure) until `resumeReading()`.
    public func pauseReading() {
        loop.preconditionInLoop()
        guard !readingPaused, !isClosed else { return }
        readingPaused = true
        if started { loop.reregister(fd: fd, readable: false, writable: wantWritable) }
    }

    /// Resumes reading after `pauseReading()`.
    public func resumeReading() {
        loop.preconditionInLoop()
        guard readingPaused, !isClosed else { return }
        readingPaused = false
        guard started else { return }
        resumeTLSInput()
        if parkedAfterHangup {
            parkedAfterHangup = false
            do { try loop.register(fd: fd, self, readable: true, writable: wantWritable) } catch { closeNow(error: error) }
        } else {
            loop.reregister(fd: fd, readable: true, writable: wantWritable)
        }
    }

    /// Closes after every queued byte is written (an orderly close).
    public func close() {
        loop.preconditionInLoop()
        guard !isClosed else { return }
        closeWhenFlushed = true
        guard queueTLSCloseNotify() else { return }
        if !inRead && !inWritabilityCallback { flushNow() }
    }

    /// Closes at once, dropping queued bytes; the handler sees `error`.
    public func abort(_ error: NetError? = nil) {
        loop.preconditionInLoop()
        closeNow(error: error)
    }

    /// Writes what is queued now, even inside a read callback (where writes are otherwise
    /// coalesced until the callback returns). A protocol that turns one large read into many
    /// replies calls it every so often so the peer can start on the first replies while the
    /// rest are produced.
    public func flush() {
        loop.preconditionInLoop()
        flushNow()
    }

    /// Shuts down the sending side after queued bytes are written (TCP half-close).
    public func shutdownOutput() {
        loop.preconditionInLoop()
        guard !isClosed else { return }
        guard queueTLSCloseNotify() else { return }
        flushNow()
        if pending.isEmpty { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }
    }

    // MARK: Selectable

    public func readable() {
        guard !isClosed else { return }
        if readingPaused {
            // Only HUP or ERR wake a paused connection. Writes fail now if the peer is gone;
            // otherwise leave epoll until the owner resumes and reads what is buffered.
            flushNow()
            if !isClosed && !parkedAfterHangup {
                loop.deregister(fd: fd)
                parkedAfterHangup = true
            }
            return
        }
        let buf = loop.sharedReadBuffer
        inRead = true
        var reads = 0
        while !isClosed && !readingPaused {
            // recv, not read: a socket read through the VFS pays its file-permission and
            // fsnotify hooks on every call, which is measurable at one read per small message.
            let n = Glibc.recv(fd, buf.baseAddress, buf.count, 0)
            if n > 0 {
                if tls != nil {
                    receiveTLS(UnsafeRawBufferPointer(start: buf.baseAddress, count: n))
                } else {
                    handler?.connectionRead(self, UnsafeMutableRawBufferPointer(start: buf.baseAddress, count: n))
                }
                reads += 1
                // Level-triggered: leave the rest for the next turn so other sockets get served.
                if n < buf.count || reads >= 4 { break }
            } else if n == 0 {
                inRead = false
                guard tlsInputEnded() else { return }
                inputClosed()
                return
            } else {
                let e = errno
                if e == EINTR { continue }
                inRead = false
                if e != EAGAIN && e != EWOULDBLOCK { closeNow(error: .from(errno: e, operation: "read")) }
                else { flushNow() }
                return
            }
        }
        inRead = false
        flushNow()
    }

    public func writable() {
        flushNow()
    }

    func inputClosed() {
        guard !isClosed else { return }
        if !readingPaused { readingPaused = true; loop.reregister(fd: fd, readable: false, writable: wantWritable) }
        handler?.connectionInputClosed(self)
        if !isClosed && closesWhenInputEnds { close() }
    }

    func flushNow() {
        guard !isClosed, started else { return }
        while true {
            guard sealTLSPlaintext() else { return }
            if !pending.isEmpty {
                if let e = pending.flush(fd: fd) {
                    closeNow(error: .from(errno: e, operation: "writev"))
                    return
                }
            }
            let needOut = !pending.isEmpty
            if needOut != wantWritable {
                wantWritable = needOut
                loop.reregister(fd: fd, readable: !readingPaused, writable: needOut)
            }
            guard !writableFlag && pending.byteCount <= options.writeLowWaterMark else { break }
            writableFlag = true
            if inWrite {
                // Not from inside `write`: the writer is in the middle of handing over a message
                // (a frame in pieces), and a handler that writes on "writable" would cut into it.
                loop.execute { [self] in
                    guard !isClosed, writableFlag else { return }
                    handler?.connectionWritabilityChanged(self, writable: true)
                }
                break
            }
            if inRead || inWritabilityCallback {
                // Whoever is reading or called back flushes what the handler writes.
                handler?.connectionWritabilityChanged(self, writable: true)
                break
            }
            // What the handler writes now is queued, and leaves below in one system call per
            // round, not one per write: a bulk sender refills the socket from this callback
            // (a push's `rev` frames were one `send` each, 40% of the sending loop's time).
            inWritabilityCallback = true
            wroteInWritabilityCallback = false
            handler?.connectionWritabilityChanged(self, writable: true)
            inWritabilityCallback = false
            // Nothing written: what is still queued waits for the socket's next writable turn
            // (trying it again now would only meet EAGAIN).
            if isClosed || !wroteInWritabilityCallback { break }
        }
        if closeWhenFlushed && pending.isEmpty && tlsBufferedByteCount == 0 && !isClosed { closeNow(error: closeError) }
    }

    func closeNow(error: NetError?) {
        guard !isClosed else { return }
        isClosed = true
        discardTLSState()
        if started {
            loop.deregister(fd: fd)
            loop.removeShutdownHook(self)
        }
        pending.removeAll()
        Glibc.close(fd)
        fd = -1
        let h = handler
        handler = nil
        h?.connectionClosed(self, error: error)
    }
}

extension TCPConnection {
    /// Connects to `address` on `loop`; `completion` runs on the loop with the connection (not
    /// yet started) or the error. Fails with `.timedOut` after `timeout` seconds.
    public static func connect(to address: SocketAddress, on loop: EventLoop, timeout: Double = 10,
                               options: ConnectionOptions = ConnectionOptions(),
                               _ completion: @escaping @Sendable (Result<TCPConnection, NetError>) -> Void) {
        let accepted = loop.execute {
            let fd: Int32
            do throws(NetError) { fd = try Socket.make(family: address.family) } catch { completion(.failure(error)); return }
            let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
            if rc == 0 {
                completion(.success(TCPConnection(fd: fd, loop: loop, options: options)))
                return
            }
            let e = errno
            if e != EINPROGRESS {
                Glibc.close(fd)
                completion(.failure(.from(errno: e, operation: "connect")))
                return
            }
            let pendingConnect = PendingConnect(fd: fd, loop: loop, options: options, completion: completion)
            do throws(NetError) { try loop.register(fd: fd, pendingConnect, readable: false, writable: true) } catch {
                Glibc.close(fd); completion(.failure(error)); return
            }
            pendingConnect.timer = loop.schedule(after: timeout) { [weak pendingConnect] in
                pendingConnect?.finish(.timedOut)
            }
            loop.onShutdown(pendingConnect) { [weak pendingConnect] in pendingConnect?.finish(.loopShutDown) }
        }
        if !accepted { completion(.failure(.loopShutDown)) }
    }

    /// Resolves `host` and connects to its addresses in turn until one answers.
    public static func connect(host: String, port: Int, on loop: EventLoop, timeout: Double = 10,
                               options: ConnectionOptions = ConnectionOptions()) async throws(NetError) -> TCPConnection {
        let addresses = try await Resolver.resolve(host: host, port: port)
        var lastError = NetError.connectionRefused
        for a in addresses {
            let r: Result<TCPConnection, NetError> = await withCheckedContinuation { c in
                connect(to: a, on: loop, timeout: timeout, options: options) { c.resume(returning: $0) }
            }
            switch r {
            case .success(let conn): return conn
            case .failure(let e): lastError = e
            }
        }
        throw lastError
    }
}

/// A connect in progress: waits for writability, then checks SO_ERROR.
private final class PendingConnect: Selectable {
    let fd: Int32
    let loop: EventLoop
    let options: ConnectionOptions
    var completion: (@Sendable (Result<TCPConnection, NetError>) -> Void)?
    var timer: TimerHandle?

    init(fd: Int32, loop: EventLoop, options: ConnectionOptions,
         completion: @escaping @Sendable (Result<TCPConnection, NetError>) -> Void) {
        self.fd = fd; self.loop = loop; self.options = options; self.completion = completion
    }

    func readable() { writable() }

    func writable() {
        let e = Socket.pendingError(fd)
        finish(e == 0 ? nil : .from(errno: e, operation: "connect"))
    }

    func finish(_ error: NetError?) {
        guard let c = completion else { return }
        completion = nil
        loop.deregister(fd: fd)
        loop.removeShutdownHook(self)
        if let t = timer { loop.cancel(t) }
        if let error {
            Glibc.close(fd)
            c(.failure(error))
        } else {
            c(.success(TCPConnection(fd: fd, loop: loop, options: options)))
        }
    }
}
