import CFerrySystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A listening TCP socket. Accepted connections are spread over the loops of a group and
/// handed to `onAccept` on their own loop, not yet started.
///
/// Safety of `@unchecked Sendable`: `fd` and `closed` are touched only on `loop` (the listener's
/// loop); `boundAddress`, `group` and `onAccept` are immutable.
public final class TCPListener: Selectable, @unchecked Sendable {
    /// Called on the connection's loop for each accepted connection.
    public typealias AcceptHandler = @Sendable (TCPConnection) -> Void

    /// The loop that accepts.
    public let loop: EventLoop
    private let group: EventLoopGroup
    private var fd: Int32
    private var closed = false
    private let onAccept: AcceptHandler
    private let options: ConnectionOptions
    private let tls: TLSContext?
    /// The address actually bound (with the kernel's port when 0 was asked for).
    public let boundAddress: SocketAddress

    private init(fd: Int32, loop: EventLoop, group: EventLoopGroup, options: ConnectionOptions,
                 tls: TLSContext?, address: SocketAddress, onAccept: @escaping AcceptHandler) {
        self.fd = fd; self.loop = loop; self.group = group; self.options = options; self.tls = tls
        self.boundAddress = address; self.onAccept = onAccept
    }

    /// Binds `host`:`port` (numeric address; port 0 picks a free one) and starts accepting.
    /// With `tls` (a server context) every accepted connection runs TLS: its handler sees
    /// plaintext once the handshake has succeeded.
    public static func bind(host: String, port: Int, group: EventLoopGroup, backlog: Int32 = 1024,
                            options: ConnectionOptions = ConnectionOptions(), tls: TLSContext? = nil,
                            onAccept: @escaping AcceptHandler) async throws(NetError) -> TCPListener {
        let addresses = try await Resolver.resolve(host: host, port: port)
        let address = addresses[0]
        let fd = try Socket.make(family: address.family)
        Socket.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        if address.family == AF_INET6 { Socket.setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1) }
        if address.withSockAddr({ Glibc.bind(fd, $0, $1) }) != 0 {
            let e = errno; Glibc.close(fd); throw .system(operation: "bind \(address)", errno: e)
        }
        if Glibc.listen(fd, backlog) != 0 {
            let e = errno; Glibc.close(fd); throw .system(operation: "listen", errno: e)
        }
        let bound = Socket.localAddress(fd) ?? address
        let loop = group.loops[0]
        let listener = TCPListener(fd: fd, loop: loop, group: group, options: options, tls: tls, address: bound, onAccept: onAccept)
        do {
            try await loop.submit {
                try loop.register(fd: fd, listener, readable: true, writable: false)
                loop.onShutdown(listener) { [weak listener] in listener?.closeOnLoop() }
            }
        } catch {
            Glibc.close(fd)
            throw (error as? NetError) ?? .loopShutDown
        }
        return listener
    }

    public func readable() {
        // Bounded batch so a connection flood cannot starve established sockets.
        for _ in 0..<64 {
            guard !closed else { return }
            let c = ferry_accept(fd)
            if c < 0 {
                let e = errno
                if e == EINTR || e == ECONNABORTED { continue }
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM {
                    // Out of descriptors or memory: the socket stays readable, and polling it
                    // again at once would spin a core doing nothing. Stop listening for a
                    // tenth of a second; the backlog keeps the waiting connections.
                    loop.reregister(fd: fd, readable: false, writable: false)
                    _ = loop.schedule(after: 0.1) { [weak self] in
                        guard let self, !self.closed else { return }
                        self.loop.reregister(fd: self.fd, readable: true, writable: false)
                    }
                }
                // EAGAIN: nothing more to accept this turn.
                return
            }
            let target = group.next()
            let options = self.options
            let onAccept = self.onAccept
            let tls = self.tls
            let hand: @Sendable () -> Void = {
                let connection = TCPConnection(fd: c, loop: target, options: options)
                if let tls {
                    // Without a session (out of memory) the connection just closes (deinit).
                    do { try connection.startTLS(tls) } catch { return }
                }
                onAccept(connection)
            }
            if target === loop {
                hand()
            } else if !target.execute(hand) {
                Glibc.close(c)
            }
        }
    }

    public func writable() {}

    private func closeOnLoop() {
        guard !closed else { return }
        closed = true
        loop.deregister(fd: fd)
        loop.removeShutdownHook(self)
        Glibc.close(fd)
        fd = -1
    }

    /// Stops accepting and closes the socket. Connections already accepted are not touched.
    public func close() async {
        _ = try? await loop.submit { self.closeOnLoop() }
    }
}
