import Synchronization

/// Read-only connections for queries, so reads never wait for the writer (WAL readers see the
/// last committed state). A connection is checked out for one call and returned afterwards.
///
/// On the writer's own thread inside a batch (work from `Database.write`), reads use the write
/// connection instead: the batch's transaction may hold what that work wrote a moment ago, not
/// committed yet, and a read after a write must see it.
final class ReaderPool: Sendable {
    private struct State {
        var idle: [Connection] = []
        var closed = false
    }

    let path: String
    private let state = Mutex(State())
    private let writer: Writer

    init(path: String, writer: Writer) {
        self.path = path
        self.writer = writer
    }

    /// Runs `body` on one connection in one read transaction, so its reads see one state. A
    /// savepoint, not `BEGIN`: inside a batch the connection is the writer's, whose open
    /// transaction must not be committed here.
    func withSnapshot<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        try withReader { (c) throws(StoreError) -> T in
            try c.prepare("SAVEPOINT snapshot").run()
            defer { try? c.prepare("RELEASE snapshot").run() }
            return try body(c)
        }
    }

    func withReader<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        if let conn = writer.connectionInBatch() { return try body(conn) }
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
