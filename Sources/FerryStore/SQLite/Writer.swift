import Synchronization

/// The one serial writer of a database: owns the write connection and the sequence counter.
/// Every mutation runs as one `BEGIN IMMEDIATE … COMMIT` under its lock; an error rolls back,
/// so a throwing operation has written nothing.
///
/// Synchronous callers (their own threads: the CLI, tests, an embedding app) take the lock
/// directly. Async code goes through `perform`, which runs the work on the writer's own
/// thread (`WriterThread`), never one of Swift's cooperative pool: waiting for the lock, a
/// commit or an fsync never takes a thread the event loops' tasks need (2 on a 2-core
/// machine). The hop costs 15–50 µs (docs/architecture.md, "Threads"), which callers amortise
/// by batching.
///
/// **Group commit.** Work that queued up for the writer's thread together runs in one SQLite
/// transaction: each of its transactions becomes a savepoint (an error rolls back only that
/// one), and one `COMMIT` ends them all. Every caller gets its answer after that commit, so
/// a success still means the data is durable; if the commit fails, every caller whose work
/// was in it gets the error. Nothing waits for company: a lone item commits at once.
final class Writer: Sendable {
    struct State {
        var connection: Connection?
        var lastSequence: Int64
        /// `PRAGMA data_version` when last seen: it moves only when another connection (another
        /// process) commits, and then the sequence counter must be re-read.
        var dataVersion: Int64 = -1
        /// The registered Mango indexes as the last transaction saw them; nil after any
        /// transaction that changed them, and after another process's commit (which may have).
        var mangoIndexes: RegisteredMangoIndexes?
    }

    private let state: Mutex<State>
    let notifier: ChangeNotifier
    /// Where `perform` runs its work: in order, what queued up together as one batch.
    private let thread: WriterThread

    /// What the writer's thread keeps while it runs a batch with the lock held.
    private let batch: WriterBatch

    /// Transactions committed through this writer (a batch's shared one counts once).
    var commits: Int { batch.commits.load(ordering: .relaxed) }

    /// Checkpoints the WAL off the writer's thread, when the database has one.
    private let checkpointer: WALCheckpointer?

    init(connection: Connection, lastSequence: Int64, checkpointer: WALCheckpointer? = nil, niceness: Int32 = 0) {
        state = Mutex(State(connection: connection, lastSequence: lastSequence))
        batch = WriterBatch()
        thread = WriterThread(niceness: niceness)
        notifier = ChangeNotifier(lastSequence: lastSequence)
        self.checkpointer = checkpointer
        checkpointer?.install(on: connection.handle)
        // Weak: queued work must not keep a writer alive; without it, items run one by one.
        thread.setBatchRunner { [weak self] items in
            if let self { self.run(items) } else { for item in items { item() } }
        }
    }

    /// Runs `body` in one write transaction. The sequence counter only advances if it commits.
    func transaction<T: Sendable>(_ context: StoreContext, _ body: (WriteTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        // On the writer's thread inside a batch the lock is already held, by the batch.
        if let held = batch.heldState() { return try batch.savepoint(held, context, body) }
        let (result, published) = try state.withLock { (s: inout State) throws(StoreError) -> (T, Int64?) in
            guard let conn = s.connection else { throw .closed }
            // Another process's commits seen here are published with this transaction's (the
            // external-write watcher skips its check while this lock is held).
            let caughtUp = try WriterBatch.begin(&s, conn)
            let txn = WriteTransaction(connection: conn, lastSequence: s.lastSequence, context: context)
            txn.mangoIndexes = s.mangoIndexes
            do throws(StoreError) {
                let r = try body(txn)
                try batch.commitTransaction(conn, recording: txn.lastSequence != s.lastSequence ? txn.lastSequence : nil)
                s.mangoIndexes = txn.changedMangoIndexes ? nil : txn.mangoIndexes
                let moved = caughtUp || txn.lastSequence != s.lastSequence
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

    /// Runs `body` on the writer's own thread and returns its result, suspending the caller (not
    /// blocking its thread) meanwhile. A cancelled caller still gets the work done: what it
    /// asked to write is written, and its answer says so.
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws(StoreError) -> T) async throws(StoreError) -> T {
        let result = await withCheckedContinuation { (c: CheckedContinuation<Result<T, StoreError>, Never>) in
            let batch = self.batch
            let queued = thread.submit {
                batch.beginItem()
                let result: Result<T, StoreError>
                do throws(StoreError) { result = .success(try body()) } catch { result = .failure(error) }
                // Answered once the batch's transaction has committed (or failed to).
                batch.afterCommit { commitError in c.resume(returning: commitError.map { .failure($0) } ?? result) }
            }
            if !queued { c.resume(returning: .failure(.closed)) }
        }
        return try result.get()
    }

    /// Runs one wake-up's items on the writer's thread with the lock held throughout, so their
    /// transactions share one commit; then publishes the new sequence and answers the callers.
    private func run(_ items: [WriterThread.Work]) {
        let (answers, published) = state.withLock { (s: inout State) in
            withUnsafeMutablePointer(to: &s) { held in batch.run(items, held: held) }
        }
        if let published { notifier.publish(published) }
        for (answer, error) in answers { answer(error) }
    }

    /// Runs `update` once the transaction that just wrote what it reflects has committed: at
    /// once, except inside a batch, whose transaction commits at its end (and never, if it does
    /// not). For in-memory copies of stored settings.
    func whenCommitted(_ update: @escaping () -> Void) { batch.whenCommitted(update) }

    /// The write connection, when called on the writer's thread inside a batch (whose
    /// transaction may hold writes not committed yet, which reads there must see); else nil.
    func connectionInBatch() -> Connection? { batch.heldState()?.pointee.connection }

    /// Async work queued for the writer's thread and not yet started.
    var queuedWork: Int { thread.queuedWork }

    /// Re-reads the sequence counter if another process committed since we last looked (the
    /// file may be shared with other `ferry` commands, SQLite WAL). Returns whether it moved.
    @discardableResult
    static func catchUp(_ s: inout State, _ conn: Connection) throws(StoreError) -> Bool {
        let version = try conn.scalarInt("PRAGMA data_version") ?? 0
        guard version != s.dataVersion else { return false }
        s.dataVersion = version
        // Another process committed: it may have registered or dropped an index.
        s.mangoIndexes = nil
        let stored = try conn.scalarInt("SELECT value FROM meta WHERE key = 'last_sequence'") ?? 0
        guard stored > s.lastSequence else { return false }
        s.lastSequence = stored
        return true
    }

    /// Looks for commits by other processes and wakes live change feeds for them, unless a
    /// transaction of this process holds the writer: returns false then, without waiting (that
    /// transaction re-reads the counter itself; the caller looks again later).
    @discardableResult
    func noticeExternalCommits() -> Bool {
        let outcome = state.withLockIfAvailable { (s: inout State) -> Int64? in
            guard let conn = s.connection, (try? Writer.catchUp(&s, conn)) == true else { return nil }
            return s.lastSequence
        }
        guard let outcome else { return false }
        if let seq = outcome { notifier.publish(seq) }
        return true
    }

    /// Runs `body` on the write connection outside any transaction (maintenance).
    func withConnection<T: Sendable>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        if let held = batch.heldState() {
            // Inside a batch: what the batch wrote so far commits first (maintenance such as
            // VACUUM cannot run inside a transaction).
            guard !batch.isInsideTransaction else { throw .invalidArgument("maintenance cannot run inside a write transaction") }
            if let failure = batch.commit(held) { throw failure }
            guard let conn = held.pointee.connection else { throw .closed }
            return try body(conn)
        }
        return try state.withLock { (s: inout State) throws(StoreError) -> T in
            guard let conn = s.connection else { throw .closed }
            return try body(conn)
        }
    }

    func close() {
        let conn: Connection?
        if let held = batch.heldState() {
            // Closed by work on the writer's own thread: what the batch wrote commits first,
            // and the batch, which holds the lock, finds the connection gone.
            batch.commit(held)
            conn = held.pointee.connection
            held.pointee.connection = nil
        } else {
            conn = state.withLock { s -> Connection? in
                defer { s.connection = nil }
                return s.connection
            }
        }
        // Work still queued runs and finds the database closed.
        thread.stop()
        // The checkpointer's connection closes first, so closing the write connection — the
        // last one — checkpoints the WAL into the main file and removes it.
        if let conn { checkpointer?.uninstall(from: conn.handle) }
        checkpointer?.close()
        conn?.close()
        notifier.close()
    }
}
