import Synchronization

/// The one serial writer of a database: owns the write connection and the sequence counter.
/// Every mutation runs as one `BEGIN IMMEDIATE … COMMIT` under its lock; an error rolls back,
/// so a throwing operation has written nothing.
///
/// A mutex rather than an actor or queue hop: a cross-thread hop costs 15–50 µs on these
/// machines (DESIGN.md), several times an indexed SQLite write, and callers batch anyway.
final class Writer: Sendable {
    struct State {
        var connection: Connection?
        var lastSequence: Int64
    }

    private let state: Mutex<State>
    let notifier: ChangeNotifier

    init(connection: Connection, lastSequence: Int64) {
        state = Mutex(State(connection: connection, lastSequence: lastSequence))
        notifier = ChangeNotifier(lastSequence: lastSequence)
    }

    /// Runs `body` in one write transaction. The sequence counter only advances if it commits.
    func transaction<T: Sendable>(_ context: StoreContext, _ body: (WriteTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        let (result, published) = try state.withLock { (s: inout State) throws(StoreError) -> (T, Int64?) in
            guard let conn = s.connection else { throw .closed }
            try conn.execute("BEGIN IMMEDIATE")
            let txn = WriteTransaction(connection: conn, lastSequence: s.lastSequence, context: context)
            do throws(StoreError) {
                let r = try body(txn)
                if txn.lastSequence != s.lastSequence {
                    let u = try conn.prepare("UPDATE meta SET value = ? WHERE key = 'last_sequence'")
                    u.bind(1, txn.lastSequence)
                    try u.run()
                }
                try conn.execute("COMMIT")
                let moved = txn.lastSequence != s.lastSequence
                s.lastSequence = txn.lastSequence
                return (r, moved ? txn.lastSequence : nil)
            } catch {
                try? conn.execute("ROLLBACK")
                throw error
            }
        }
        if let published { notifier.publish(published) }
        return result
    }

    /// Runs `body` on the write connection outside any transaction (maintenance).
    func withConnection<T: Sendable>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        try state.withLock { (s: inout State) throws(StoreError) -> T in
            guard let conn = s.connection else { throw .closed }
            return try body(conn)
        }
    }

    func close() {
        let conn = state.withLock { s -> Connection? in
            defer { s.connection = nil }
            return s.connection
        }
        // Closing the last connection checkpoints the WAL into the main file.
        conn?.close()
        notifier.close()
    }
}
