import FerryBLIP
import FerryStore
import FoundationEssentials
import Synchronization

/// Stores received revisions in batches: whatever has arrived while the previous transaction
/// ran (up to `maxBatch`) is inserted in one transaction, then the batch's completion answers
/// its senders. So a reply to a `rev` always means the revision is durable, and a stream of small
/// revisions costs one commit per batch rather than one per revision.
///
/// When more revisions are on their way (the pull ledger's `onTheWay`), a batch smaller than
/// the linger size (`setLingerBatch`) waits up to `lingerTime` for them: without it a stream
/// splits into many transactions of a few revisions, each paying a commit. The linger size must
/// stay well under the sender's window of unanswered revisions (a pull feed's is one batch), so
/// the sender is never stalled waiting on a batch. Only a pull sets one: a listener taking a
/// push never lingers, since its writer is the push's bottleneck and what arrives while one
/// transaction commits makes the next anyway (Ferry's push 9–12 % faster without the wait,
/// docs/performance.md).
final class Inserter: Sendable {
    /// A received revision and what its completion needs.
    struct Item: Sendable {
        var revision: ReplicatedRevision
        /// The `rev` it came in.
        var request: BLIPIncomingRequest
        /// The attachments its download policy wants, queued once it is stored.
        var deferred: [AttachmentDownload]
    }

    /// Runs once per transaction, after it commits or fails, with its items and their results
    /// in order (a single item if the inserter had closed). Once per batch rather than per
    /// revision: answering, counting and the ledger's update each cost a hop or a lock.
    typealias Completion = @Sendable ([Item], [Result<InsertOutcome, StoreError>]) -> Void

    /// Runs inside each batch's transaction after the inserts (e.g. to write a checkpoint
    /// covering exactly what committed), given the items and their results.
    typealias AfterInsert = @Sendable (Batch, [Item], [Result<InsertOutcome, StoreError>]) throws(StoreError) -> Void
    /// Runs after each transaction that committed, before its items' completions.
    typealias AfterCommit = @Sendable () -> Void

    let database: Database
    let remote: String?
    let resolver: ConflictResolver?
    let allowConflicts: Bool
    let afterInsert: AfterInsert?
    let afterCommit: AfterCommit?
    let completion: Completion
    fileprivate struct Queue {
        var items: [Item] = []
        var waiter: CheckedContinuation<Void, Never>?
        /// Resume the waiter once this many items are queued.
        var threshold = 1
        /// Identifies the current waiter, so a late linger timer leaves a newer one alone.
        var waiterID = 0
        var closed = false
        /// A batch smaller than this waits (briefly) for revisions on their way: at most
        /// `lingerLimit`, less after a wait timed out (see `run`).
        var lingerBatch = 1
        var lingerLimit = 1
        /// The most revisions one transaction takes.
        var maxBatch: Int
        /// A transaction was asked for even if nothing is queued (`requestCommit`).
        var commitRequested = false
        /// Revisions on their way to the queue (the pull ledger's count).
        let onTheWay: @Sendable () -> Int
    }
    private let queue: Mutex<Queue>

    /// A planted bug for the cluster harness to catch (Tests/Cluster): with the environment
    /// variable `FERRY_TEST_DROP_INCOMING_DELETIONS=1`, incoming deletions are acknowledged and
    /// silently not stored. Off unless that variable is set; nothing else reads it.
    static let dropsIncomingDeletions = ProcessInfo.processInfo.environment["FERRY_TEST_DROP_INCOMING_DELETIONS"] == "1"
    private let worker = Mutex<Task<Void, Never>?>(nil)

    /// `onTheWay` tells how many more revisions are coming (the pull ledger's `onTheWay`); it
    /// is read under the inserter's lock, so it must not call back into the inserter.
    init(database: Database, remote: String?, resolver: ConflictResolver?, allowConflicts: Bool,
         maxBatch: Int = 200, onTheWay: @escaping @Sendable () -> Int = { 0 },
         afterInsert: AfterInsert? = nil, afterCommit: AfterCommit? = nil, completion: @escaping Completion) {
        self.database = database
        self.remote = remote
        self.resolver = resolver
        self.allowConflicts = allowConflicts
        self.afterInsert = afterInsert
        self.afterCommit = afterCommit
        self.completion = completion
        queue = Mutex(Queue(maxBatch: max(1, maxBatch), onTheWay: onTheWay))
        // The worker holds the inserter until `close()`; every owner closes it.
        let task = Task { await self.run() }
        worker.withLock { $0 = task }
    }

    /// Queues a revision; the completion gets it after its transaction commits (or fails).
    func enqueue(_ item: Item) {
        let (waiter, closed) = queue.withLock { q -> (CheckedContinuation<Void, Never>?, Bool) in
            guard !q.closed else { return (nil, true) }
            q.items.append(item)
            return (q.takeWaiterIfReady(), false)
        }
        if closed { completion([item], [.failure(.closed)]); return }
        waiter?.resume()
    }

    /// Re-reads `onTheWay` now (it dropped without a revision queued, e.g. a `norev`), so a
    /// batch waiting for those revisions goes at once.
    func nudge() {
        let waiter = queue.withLock { $0.takeWaiterIfReady() }
        waiter?.resume()
    }

    /// Asks for a transaction even when no revision is queued, so `afterInsert` runs (a puller
    /// whose listed changes were all known saves its checkpoint past them).
    func requestCommit() {
        let waiter = queue.withLock { q -> CheckedContinuation<Void, Never>? in
            q.commitRequested = true
            return q.takeWaiterIfReady()
        }
        waiter?.resume()
    }

    /// Sets the largest batch size under which the inserter waits for revisions on their way
    /// (`ReplicatorTuning.lingerBatch`; the default, 1, never waits); it lingers for fewer when
    /// the sender turns out to keep fewer in flight.
    func setLingerBatch(_ n: Int) {
        queue.withLock { q in
            q.lingerLimit = max(1, n)
            q.lingerBatch = q.lingerLimit
        }
    }

    /// Sets the most revisions one transaction takes (a puller: half the feeder's window).
    func setMaxBatch(_ n: Int) {
        queue.withLock { $0.maxBatch = max(1, n) }
    }

    /// Stops after the queued revisions are stored.
    func close() async {
        let waiter = queue.withLock { q -> CheckedContinuation<Void, Never>? in
            q.closed = true
            defer { q.waiter = nil }
            return q.waiter
        }
        waiter?.resume()
        await worker.withLock { $0 }?.value
    }

    private func run() async {
        while true {
            await waitForWork(threshold: 1)
            if let batch = queue.withLock({ $0.wantsToLinger ? $0.lingerBatch : nil }) {
                await waitForWork(threshold: batch, timeout: ReplicatorTuning.lingerTime)
            }
            guard let (items, commit) = takeNow() else { return }
            if !items.isEmpty || commit { await insert(items) }
        }
    }

    /// Waits until `threshold` items are queued, nothing more is expected, the inserter is
    /// closed, or `timeout` passes.
    private func waitForWork(threshold: Int, timeout: Duration? = nil) async {
        await withCheckedContinuation { (w: CheckedContinuation<Void, Never>) in
            let id = queue.withLock { q -> Int? in
                q.threshold = threshold
                if q.isReady { return nil }
                q.waiterID &+= 1
                q.waiter = w
                return q.waiterID
            }
            guard let id else { w.resume(); return }
            guard let timeout else { return }
            Task {
                try? await Task.sleep(for: timeout)
                let late = self.queue.withLock { q -> CheckedContinuation<Void, Never>? in
                    guard q.waiterID == id, q.waiter != nil else { return nil }
                    // A sender that keeps fewer revisions unanswered than the linger size (a
                    // small window) cannot fill the batch before it is answered: linger next
                    // time only for as many as came in time.
                    q.lingerBatch = max(1, q.items.count)
                    defer { q.waiter = nil }
                    return q.waiter
                }
                late?.resume()
            }
        }
    }

    /// The next batch and whether a transaction was asked for; nil once closed and empty.
    private func takeNow() -> (items: [Item], commit: Bool)? {
        queue.withLock { q -> ([Item], Bool)? in
            // More queued than the linger size (lowered by a wait that timed out, see
            // `waitForWork`): the sender's window is larger, so the size doubles back, up to
            // the limit.
            if q.items.count > q.lingerBatch { q.lingerBatch = min(q.lingerLimit, q.lingerBatch * 2) }
            // Every transaction runs `afterInsert`, so any batch answers a request.
            let commit = q.commitRequested
            q.commitRequested = false
            if !q.items.isEmpty {
                // Usually all of them: the queue's array is handed over, not copied item by item.
                guard q.items.count > q.maxBatch else {
                    defer { q.items = [] }
                    return (q.items, commit)
                }
                // More than one transaction's worth: moved out, not copied — a copy retained
                // and later released every reference in every item, a few percent of a pull's
                // or a listener's pool.
                return (q.items.removeFirst(moving: q.maxBatch), commit)
            }
            return q.closed && !commit ? nil : ([], commit)
        }
    }

    /// Inserts one batch in one transaction, on the database's writer thread (so this task's
    /// pool thread is free meanwhile), then hands the batch to the completion.
    private func insert(_ items: [Item]) async {
        let results: [Result<InsertOutcome, StoreError>]
        let remote = self.remote, resolver = self.resolver, allowConflicts = self.allowConflicts, afterInsert = self.afterInsert
        do {
            results = try await database.write { (db) throws(StoreError) in try db.inBatch { (b) throws(StoreError) -> [Result<InsertOutcome, StoreError>] in
                // Index upkeep waits for the next query: kept here it would cost the one
                // writer, the pull's bottleneck, ~9 µs a document (docs/performance.md).
                b.defersIndexUpdates = true
                var out: [Result<InsertOutcome, StoreError>] = []
                out.reserveCapacity(items.count)
                // By index: a copy of each item (its revision, request and downloads) would
                // retain and release every reference in it.
                for i in items.indices {
                    if Self.dropsIncomingDeletions && items[i].revision.isDeleted {
                        out.append(.success(InsertOutcome(status: .noop, current: nil, conflictedWith: nil, resolved: false, sequence: nil)))
                        continue
                    }
                    do throws(StoreError) {
                        out.append(.success(try b.insert(items[i].revision, fromRemote: remote, resolver: resolver,
                                                         allowConflicts: allowConflicts)))
                    } catch {
                        if error.isFatal { throw error }
                        out.append(.failure(error))
                    }
                }
                try afterInsert?(b, items, out)
                return out
            } }
        } catch {
            if !items.isEmpty { completion(items, Array(repeating: .failure(error), count: items.count)) }
            return
        }
        afterCommit?()
        if !items.isEmpty { completion(items, results) }
    }
}

extension Inserter.Queue {
    /// Whether the waiter may run: enough items, or no reason to wait for more.
    var isReady: Bool {
        closed || commitRequested || (!items.isEmpty && (items.count >= threshold || onTheWay() == 0))
    }

    /// Whether a batch of what is queued now should wait for the revisions still expected.
    var wantsToLinger: Bool {
        !closed && items.count < lingerBatch && onTheWay() > 0
    }

    /// Hands out the waiter if it may run now.
    mutating func takeWaiterIfReady() -> CheckedContinuation<Void, Never>? {
        guard waiter != nil, isReady else { return nil }
        defer { waiter = nil }
        return waiter
    }
}
