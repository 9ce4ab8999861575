import CSQLite
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The writer thread's side of group commit (`Writer`): while it runs one wake-up's items with
/// the writer's lock held, the state that lock guards (reachable from that thread only, through
/// `heldState()`), the transaction the items' own transactions share as savepoints, and the
/// answers that wait for its commit.
final class WriterBatch: @unchecked Sendable {
    // @unchecked Sendable, safe because: `owner` is atomic, and every other property is read and
    // written only on the thread whose id `owner` holds, between `run` storing that id and
    // clearing it — the writer's thread, holding the writer's lock for the whole time. Any other
    // thread only loads `owner`, finds another id, and touches nothing else.
    private let owner = Atomic<UInt>(0)
    /// Commits of the writer this batch belongs to, both paths (`Writer.commits`).
    let commits = Atomic<Int>(0)
    private var held: UnsafeMutablePointer<Writer.State>?
    /// Whether a `BEGIN IMMEDIATE` of this batch is open.
    private var open = false
    /// The sequence when it began, restored if it does not commit.
    private var startSequence: Int64 = 0
    /// Another process's commits were seen when it began: published even if it fails.
    private var caughtUp = false
    /// Answers of items run since the transaction began (or since the last commit).
    private var waiting: [Answer] = []
    private var answered: [(Answer, StoreError?)] = []
    private var published: Int64?
    /// Whether the running item has written into the open transaction, and the error that
    /// rolled back what it wrote, if one did: its answer is that error whatever comes after.
    private var itemWrote = false
    private var itemLost: StoreError?
    /// Savepoints open right now: a transaction inside another (a nested write) is refused.
    private var depth = 0
    /// What to do once the open transaction has committed (in-memory copies of what it wrote).
    private var onCommit: [() -> Void] = []

    /// The answer for writes whose transaction SQLite rolled back outside our savepoints.
    static let endedBySQLite = StoreError.sqlite(code: SQLITE_ABORT, message: "the transaction was rolled back")

    /// Told nil once what its item wrote has committed, or the error that kept it from committing.
    typealias Answer = @Sendable (StoreError?) -> Void

    /// Runs `items` with the writer's lock held (`held` is what it guards), then commits what
    /// they wrote. Returns the answers to give, with their outcomes, and the sequence to
    /// publish; the caller does both after releasing the lock.
    func run(_ items: [WriterThread.Work], held: UnsafeMutablePointer<Writer.State>) -> (answers: [(Answer, StoreError?)], published: Int64?) {
        self.held = held
        owner.store(UInt(pthread_self()), ordering: .releasing)
        for item in items { item() }
        commit(held)
        let outcome = (answered, published)
        answered = []
        published = nil
        self.held = nil
        owner.store(0, ordering: .releasing)
        return outcome
    }

    /// The state the writer's lock guards, when called on the writer's thread inside a batch
    /// (which holds that lock); nil anywhere else.
    func heldState() -> UnsafeMutablePointer<Writer.State>? {
        owner.load(ordering: .acquiring) == UInt(pthread_self()) ? held : nil
    }

    /// Whether a transaction's body is running (so committing now would split it).
    var isInsideTransaction: Bool { depth > 0 }

    /// Marks the start of an item's work (what it writes is its own from here).
    func beginItem() {
        guard heldState() != nil else { return }
        itemWrote = false
        itemLost = nil
    }

    /// Gives `answer` the outcome of the commit that ends the current item's writes — or, if a
    /// failure already rolled back something it wrote, that failure; outside a batch, success
    /// at once.
    func afterCommit(_ answer: @escaping Answer) {
        guard heldState() != nil else { return answer(nil) }
        if let lost = itemLost { answered.append((answer, lost)) } else { waiting.append(answer) }
    }

    /// Runs `update` once what the current transaction wrote has committed (at once outside a
    /// batch, where the transaction already has); never if it does not commit.
    func whenCommitted(_ update: @escaping () -> Void) {
        if heldState() != nil && open { onCommit.append(update) } else { update() }
    }

    /// Runs `body` in the batch's transaction, beginning it if need be; inside one already
    /// begun, as a savepoint. An error rolls back what `body` wrote, and only that.
    func savepoint<T>(_ held: UnsafeMutablePointer<Writer.State>, _ context: StoreContext,
                      _ body: (WriteTransaction) throws(StoreError) -> T) throws(StoreError) -> T {
        guard let conn = held.pointee.connection else { throw .closed }
        // A write inside a write (a validator or resolver saving) would reuse the savepoint's
        // sequence numbers; on any other thread it would wait on the lock forever.
        guard depth == 0 else { throw .invalidArgument("a write transaction cannot be opened inside another") }
        depth += 1
        defer { depth -= 1 }
        if open && sqlite3_get_autocommit(conn.handle) != 0 {
            // SQLite ended the transaction outside a savepoint of ours (a failed read on this
            // connection): what the batch wrote went with it.
            end(held, failure: Self.endedBySQLite)
        }
        // The first transaction of a batch needs no savepoint: nothing else is in it to keep.
        let first = !open
        if first {
            if try Self.begin(&held.pointee, conn) { caughtUp = true }
            open = true
            startSequence = held.pointee.lastSequence
        } else {
            try conn.prepare("SAVEPOINT batch_item").run()
        }
        let txn = WriteTransaction(connection: conn, lastSequence: held.pointee.lastSequence, context: context)
        txn.mangoIndexes = held.pointee.mangoIndexes
        do throws(StoreError) {
            let result = try body(txn)
            if !first { try conn.prepare("RELEASE batch_item").run() }
            held.pointee.mangoIndexes = txn.changedMangoIndexes ? nil : txn.mangoIndexes
            held.pointee.lastSequence = txn.lastSequence
            itemWrote = true
            return result
        } catch {
            if first {
                try? conn.execute("ROLLBACK")
                open = false
                if caughtUp { published = max(published ?? 0, held.pointee.lastSequence) }
                caughtUp = false
                onCommit.removeAll()
            } else if sqlite3_get_autocommit(conn.handle) != 0 {
                // SQLite ended the whole transaction itself (a full disk, an I/O error): the
                // writes of the batch's earlier items went with it, and their callers learn so.
                end(held, failure: error)
            } else {
                try? conn.prepare("ROLLBACK TO batch_item").run()
                try? conn.prepare("RELEASE batch_item").run()
            }
            throw error
        }
    }

    /// Commits what the batch wrote so far and settles the answers waiting for it; returns the
    /// error that kept it from committing, if one did.
    @discardableResult
    func commit(_ held: UnsafeMutablePointer<Writer.State>) -> StoreError? {
        guard open else {
            end(held, failure: nil)
            return nil
        }
        guard let conn = held.pointee.connection else {
            end(held, failure: .closed)
            return .closed
        }
        guard sqlite3_get_autocommit(conn.handle) == 0 else {
            // Already ended by SQLite (see `savepoint`): nothing of it is left to commit.
            end(held, failure: Self.endedBySQLite)
            return Self.endedBySQLite
        }
        do throws(StoreError) {
            try commitTransaction(conn, recording: held.pointee.lastSequence != startSequence ? held.pointee.lastSequence : nil)
            end(held, failure: nil)
            return nil
        } catch {
            try? conn.execute("ROLLBACK")
            end(held, failure: error)
            return error
        }
    }

    /// `BEGIN IMMEDIATE`, then the sequence counter re-read if another process committed
    /// (returns whether it moved); nothing stays open if that fails. Both of the writer's paths
    /// open their transactions here.
    static func begin(_ s: inout Writer.State, _ conn: Connection) throws(StoreError) -> Bool {
        // Prepared once and kept, like the savepoints: `execute` would compile it on every batch.
        try conn.prepare("BEGIN IMMEDIATE").run()
        do throws(StoreError) { return try Writer.catchUp(&s, conn) } catch {
            try? conn.execute("ROLLBACK")
            throw error
        }
    }

    /// Records the sequence counter (when it moved: `sequence`) and commits; the caller rolls
    /// back if this throws. Both of the writer's paths commit here.
    func commitTransaction(_ conn: Connection, recording sequence: Int64?) throws(StoreError) {
        if let sequence {
            let u = try conn.prepare("UPDATE meta SET value = ? WHERE key = 'last_sequence'")
            u.bind(1, sequence)
            try u.run()
        }
        try conn.prepare("COMMIT").run()
        commits.add(1, ordering: .relaxed)
    }

    /// Closes the batch's transaction (already committed or rolled back when `failure` is nil
    /// or not, respectively) and settles the answers waiting for it.
    private func end(_ held: UnsafeMutablePointer<Writer.State>, failure: StoreError?) {
        if open {
            if let failure {
                held.pointee.lastSequence = startSequence
                // The rolled-back writes may have changed the indexes; read them again.
                held.pointee.mangoIndexes = nil
                if itemWrote { itemLost = failure }
            } else {
                for update in onCommit { update() }
            }
            onCommit.removeAll()
            if caughtUp || held.pointee.lastSequence != startSequence {
                published = max(published ?? 0, held.pointee.lastSequence)
            }
        }
        open = false
        caughtUp = false
        itemWrote = false
        answered.append(contentsOf: waiting.map { ($0, failure) })
        waiting.removeAll()
    }
}
