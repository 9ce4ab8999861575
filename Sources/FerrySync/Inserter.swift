import FerryStore
import Synchronization

/// Stores received revisions in batches: whatever has arrived while the previous transaction
/// ran (up to `maxBatch`) is inserted in one transaction, then each sender is answered. So a
/// reply to a `rev` always means the revision is durable, and a stream of small revisions costs
/// one commit per batch rather than one per revision.
final class Inserter: Sendable {
    typealias Completion = @Sendable (Result<InsertOutcome, StoreError>) -> Void

    struct Item: Sendable {
        var revision: ReplicatedRevision
        var completion: Completion
    }

    /// Runs inside each batch's transaction after the inserts (e.g. to write a checkpoint
    /// covering exactly what committed), given the items and their results.
    typealias AfterInsert = @Sendable (Batch, [Item], [Result<InsertOutcome, StoreError>]) throws(StoreError) -> Void

    let database: Database
    let remote: String?
    let resolver: ConflictResolver?
    let allowConflicts: Bool
    let maxBatch: Int
    let afterInsert: AfterInsert?
    private let queue = Mutex<(items: [Item], waiter: CheckedContinuation<Void, Never>?, closed: Bool)>(([], nil, false))
    private let worker = Mutex<Task<Void, Never>?>(nil)

    init(database: Database, remote: String?, resolver: ConflictResolver?, allowConflicts: Bool,
         maxBatch: Int = 200, afterInsert: AfterInsert? = nil) {
        self.database = database
        self.remote = remote
        self.resolver = resolver
        self.allowConflicts = allowConflicts
        self.maxBatch = maxBatch
        self.afterInsert = afterInsert
        // The worker holds the inserter until `close()`; every owner closes it.
        let task = Task { await self.run() }
        worker.withLock { $0 = task }
    }

    /// Queues a revision; `completion` runs after its transaction commits (or fails).
    func enqueue(_ revision: ReplicatedRevision, completion: @escaping Completion) {
        let (waiter, closed) = queue.withLock { q -> (CheckedContinuation<Void, Never>?, Bool) in
            guard !q.closed else { return (nil, true) }
            q.items.append(Item(revision: revision, completion: completion))
            defer { q.waiter = nil }
            return (q.waiter, false)
        }
        if closed { completion(.failure(.closed)); return }
        waiter?.resume()
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
            await waitForWork()
            guard let items = takeNow() else { return }
            if !items.isEmpty { insert(items) }
        }
    }

    private func waitForWork() async {
        await withCheckedContinuation { (w: CheckedContinuation<Void, Never>) in
            let ready = queue.withLock { q -> Bool in
                if !q.items.isEmpty || q.closed { return true }
                q.waiter = w
                return false
            }
            if ready { w.resume() }
        }
    }

    private func takeNow() -> [Item]? {
        queue.withLock { q -> [Item]? in
            if !q.items.isEmpty {
                let n = min(q.items.count, maxBatch)
                defer { q.items.removeFirst(n) }
                return Array(q.items.prefix(n))
            }
            return q.closed ? nil : []
        }
    }

    private func insert(_ items: [Item]) {
        let results: [Result<InsertOutcome, StoreError>]
        do {
            results = try database.inBatch { (b) throws(StoreError) -> [Result<InsertOutcome, StoreError>] in
                var out: [Result<InsertOutcome, StoreError>] = []
                out.reserveCapacity(items.count)
                for item in items {
                    do throws(StoreError) {
                        out.append(.success(try b.insert(item.revision, fromRemote: remote, resolver: resolver,
                                                         allowConflicts: allowConflicts)))
                    } catch {
                        switch error {
                        case .sqlite, .corrupt, .notADatabase, .closed, .io: throw error
                        default: out.append(.failure(error))
                        }
                    }
                }
                try afterInsert?(b, items, out)
                return out
            }
        } catch {
            for item in items { item.completion(.failure(error)) }
            return
        }
        for (item, result) in zip(items, results) { item.completion(result) }
    }
}
