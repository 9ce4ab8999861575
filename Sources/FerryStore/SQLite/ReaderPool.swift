import Synchronization

/// Read-only connections for queries, so reads never wait for the writer (WAL readers see the
/// last committed state). A connection is checked out for one call and returned afterwards.
final class ReaderPool: Sendable {
    private struct State {
        var idle: [Connection] = []
        var closed = false
    }

    let path: String
    private let state = Mutex(State())

    init(path: String) { self.path = path }

    func withReader<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        let taken: Connection?? = state.withLock { s in s.closed ? .none : .some(s.idle.popLast()) }
        guard case .some(let pooled) = taken else { throw .closed }
        let conn: Connection
        if let pooled {
            conn = pooled
        } else {
            conn = try Connection(path: path, readOnly: true, create: false)
        }
        defer {
            // Keep a few idle connections; close extras and everything after close().
            let keep = state.withLock { s -> Bool in
                guard !s.closed, s.idle.count < 8 else { return false }
                s.idle.append(conn)
                return true
            }
            if !keep { conn.close() }
        }
        return try body(conn)
    }

    func close() {
        let idle = state.withLock { s -> [Connection] in
            s.closed = true
            defer { s.idle.removeAll() }
            return s.idle
        }
        for c in idle { c.close() }
    }
}
