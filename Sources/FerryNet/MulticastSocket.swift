import CFerrySystem
#if canImport(Glibc)
import Glibc
#endif

/// A UDP socket on an event loop for link-local multicast protocols such as multicast DNS:
/// bound to the wildcard address and a fixed port shared with other processes
/// (`SO_REUSEPORT`), joined to groups per interface, and sending out of a chosen interface.
/// Datagrams are lossy by nature, so a failed send is counted, not thrown.
///
/// Safety of `@unchecked Sendable`: `fd`, `closed` and the counters are touched only on
/// `loop` (every method asserts it); `onDatagram` is immutable.
public final class MulticastSocket: Selectable, @unchecked Sendable {
    /// One datagram as received.
    public struct Datagram: Sendable {
        /// Its bytes (at most the socket's `maxDatagramSize`).
        public var bytes: [UInt8]
        /// Who sent it.
        public var source: SocketAddress
        /// The interface it arrived on (0 if the kernel did not say).
        public var interfaceIndex: UInt32
    }

    /// The loop the socket lives on.
    public let loop: EventLoop
    /// AF_INET or AF_INET6.
    public let family: Int32
    /// Datagrams longer than this are dropped (and counted as oversized).
    public let maxDatagramSize: Int
    private var fd: Int32
    private var closed = false
    private let onDatagram: (Datagram) -> Void
    /// Sends the kernel refused (no route on an interface that just went down, a full buffer).
    public private(set) var sendFailures = 0
    /// Datagrams dropped for being longer than `maxDatagramSize`.
    public private(set) var oversized = 0

    private init(fd: Int32, loop: EventLoop, family: Int32, maxDatagramSize: Int, onDatagram: @escaping (Datagram) -> Void) {
        self.fd = fd; self.loop = loop; self.family = family; self.maxDatagramSize = maxDatagramSize; self.onDatagram = onDatagram
    }

    /// Opens and registers the socket; call on `loop`. `onDatagram` is called on the loop for
    /// each datagram received.
    public static func open(family: Int32, port: Int, loop: EventLoop, maxDatagramSize: Int = 9000,
                            onDatagram: @escaping (Datagram) -> Void) throws(NetError) -> MulticastSocket {
        loop.preconditionInLoop()
        let fd = ferry_udp_multicast_socket(family, UInt16(truncatingIfNeeded: port))
        if fd < 0 { throw .system(operation: "bind UDP port \(port)", errno: -fd) }
        let s = MulticastSocket(fd: fd, loop: loop, family: family, maxDatagramSize: maxDatagramSize, onDatagram: onDatagram)
        do {
            try loop.register(fd: fd, s, readable: true, writable: false)
        } catch {
            Glibc.close(fd)
            throw error
        }
        loop.onShutdown(s) { [weak s] in s?.close() }
        return s
    }

    /// Joins (or leaves) multicast group `group` (its host part; the port is ignored) on the
    /// interface with index `interfaceIndex`.
    public func setMembership(group: SocketAddress, interfaceIndex: UInt32, joined: Bool) throws(NetError) {
        loop.preconditionInLoop()
        guard !closed else { throw .closed }
        let bytes = group.addressBytes
        let rc = bytes.withUnsafeBufferPointer {
            ferry_udp_multicast_membership(fd, family, $0.baseAddress, interfaceIndex, joined ? 1 : 0)
        }
        // Joining twice (EADDRINUSE) or leaving a group not joined (EADDRNOTAVAIL) is the
        // state asked for already.
        if rc < 0 && -rc != EADDRINUSE && -rc != EADDRNOTAVAIL {
            throw .system(operation: joined ? "join \(group.host) on interface \(interfaceIndex)" : "leave \(group.host)", errno: -rc)
        }
    }

    /// Sends `bytes` to `destination` out of interface `interfaceIndex` (0: by the routing
    /// table). Returns whether the kernel took it.
    @discardableResult
    public func send(_ bytes: [UInt8], to destination: SocketAddress, interfaceIndex: UInt32) -> Bool {
        loop.preconditionInLoop()
        guard !closed else { return false }
        let n = bytes.withUnsafeBufferPointer { b in
            destination.withSockAddr { sa, len in ferry_udp_send(fd, b.baseAddress, b.count, sa, UInt32(len), interfaceIndex) }
        }
        if n < 0 { sendFailures += 1; return false }
        return true
    }

    /// Deregisters and closes the socket.
    public func close() {
        loop.preconditionInLoop()
        guard !closed else { return }
        closed = true
        loop.deregister(fd: fd)
        Glibc.close(fd)
        loop.removeShutdownHook(self)
    }

    /// `Selectable`: reads the waiting datagrams (up to 64 per call, so one busy socket cannot
    /// starve the loop) and hands each to `onDatagram`; longer ones are dropped and counted.
    public func readable() {
        let buffer = loop.sharedReadBuffer
        var from = sockaddr_storage()
        // Bounded, so one busy socket cannot starve the loop's other descriptors.
        for _ in 0..<64 {
            guard !closed else { return }
            var fromLength: UInt32 = 0
            var interface: UInt32 = 0
            let n = withUnsafeMutableBytes(of: &from) { raw in
                ferry_udp_receive(fd, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), min(buffer.count, maxDatagramSize + 1),
                                  raw.baseAddress, &fromLength, &interface)
            }
            if n < 0 { return }
            if n > maxDatagramSize { oversized += 1; continue }
            let source = withUnsafeBytes(of: &from) { SocketAddress(raw: $0.baseAddress!, length: Int(fromLength)) }
            onDatagram(Datagram(bytes: Array(UnsafeRawBufferPointer(rebasing: buffer[0..<n])), source: source, interfaceIndex: interface))
        }
    }

    /// `Selectable`: nothing to do; the socket is registered for reading only and sends never wait.
    public func writable() {}
}
