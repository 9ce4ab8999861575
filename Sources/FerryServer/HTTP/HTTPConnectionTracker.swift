import Synchronization

/// The daemon's open REST connections and the bytes they carried: counted where
/// `HTTPServerConnection` reads and writes (TCPConnection keeps no counters), and closed all
/// at once on shutdown — a `_changes` feed or a keep-alive client would otherwise hold its
/// socket until the process exits.
public final class HTTPConnectionTracker: Sendable {
    private let open = Mutex<[ObjectIdentifier: @Sendable () -> Void]>([:])
    private let bytesInCount = Atomic<Int>(0)
    private let bytesOutCount = Atomic<Int>(0)
    private let acceptedCount = Atomic<Int>(0)

    /// An empty tracker.
    public init() {}

    /// REST connections open now (a connection upgraded to a WebSocket leaves the count).
    public var openConnections: Int { open.withLock { $0.count } }
    /// Bytes read from REST clients since start.
    public var bytesIn: Int { bytesInCount.load(ordering: .relaxed) }
    /// Bytes written to REST clients since start.
    public var bytesOut: Int { bytesOutCount.load(ordering: .relaxed) }
    /// REST connections taken since start.
    public var connectionsAccepted: Int { acceptedCount.load(ordering: .relaxed) }

    func opened(_ id: ObjectIdentifier, close: @escaping @Sendable () -> Void) {
        acceptedCount.add(1, ordering: .relaxed)
        open.withLock { $0[id] = close }
    }

    func left(_ id: ObjectIdentifier) { open.withLock { _ = $0.removeValue(forKey: id) } }

    func read(_ n: Int) { bytesInCount.add(n, ordering: .relaxed) }

    func wrote(_ n: Int) { bytesOutCount.add(n, ordering: .relaxed) }

    /// Closes every open REST connection (each on its own loop).
    func closeAll() {
        let all = open.withLock { $0.values }
        for close in all { close() }
    }
}
