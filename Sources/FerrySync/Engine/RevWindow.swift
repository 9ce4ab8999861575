import FerryBLIP
import Synchronization

/// The `rev` messages of a pull feed: queued by the feed, sent on the connection's loop as
/// slots free up, never more than `capacity` unanswered — so a puller killed at any point is
/// re-sent at most that many (the rest it already stored, and answers "have it" for).
///
/// A reply frees its slot on the loop, and the next queued revision goes out right there: no
/// hop to the feed's task and back between a reply and the next send. The feed meanwhile
/// prepares its next batch and queues it once the queue is down to half the window (`waitForRoom`),
/// so the loop always has revisions ready. The first connection failure ends the feed.
final class RevWindow: Sendable {
    typealias ResultHandler = @Sendable (Result<BLIPMessage, BLIPError>) -> Void

    private struct State {
        var available: Int
        /// Queued revisions; those before `head` are sent and dropped (nil), so a sent body is
        /// not kept.
        var queue: [(message: BLIPMessage, handler: ResultHandler)?] = []
        var head = 0
        var roomWaiters: [CheckedContinuation<Void, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var error: ReplicationError?

        var queued: Int { queue.count - head }
    }

    let capacity: Int
    private let connection: BLIPConnection
    /// Told how many revisions went out (not merely queued), as they go.
    private let onSent: @Sendable (Int) -> Void
    private let state: Mutex<State>

    init(capacity: Int, connection: BLIPConnection, onSent: @escaping @Sendable (Int) -> Void) {
        self.capacity = max(1, capacity)
        self.connection = connection
        self.onSent = onSent
        state = Mutex(State(available: max(1, capacity)))
    }

    /// Throws the failure that ended the feed, if one happened.
    func check() throws(ReplicationError) {
        if let e = state.withLock({ $0.error }) { throw e }
    }

    /// Queues revisions; each goes out when a slot is free, and `handler` gets its reply (on the
    /// loop; its slot is freed right after). A failure other than an error response also ends
    /// the feed (`fail`), so the handler need not hold the window. Nothing is queued once the
    /// feed has ended.
    func send(_ messages: [BLIPMessage], handler: @escaping @Sendable (Int, Result<BLIPMessage, BLIPError>) -> Void) {
        guard !messages.isEmpty else { return }
        let ended = state.withLock { s -> Bool in
            guard s.error == nil else { return true }
            for (i, m) in messages.enumerated() { s.queue.append((m, { handler(i, $0) })) }
            return false
        }
        guard !ended else { return }
        if connection.loop.inEventLoop { pump() } else { connection.loop.execute { self.pump() } }
    }

    /// Waits until at most half a window of revisions is queued (or the feed failed).
    func waitForRoom() async throws(ReplicationError) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.error != nil || s.queued <= capacity / 2 { return true }
                s.roomWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        try check()
    }

    /// Waits until every queued revision was sent and answered; throws the failure if one
    /// ended the feed.
    func drain() async throws(ReplicationError) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.error != nil || (s.queued == 0 && s.available == capacity) { return true }
                s.drainWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        try check()
    }

    /// Ends the feed (it stopped or was cancelled): drops what is still queued, so nothing more
    /// is sent and no queued message outlives it.
    func close() { fail(.stopped) }

    /// Records a failure that ends the feed, drops what is still queued, and wakes everyone.
    func fail(_ error: ReplicationError) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.error == nil { s.error = error }
            s.queue = []
            s.head = 0
            defer { s.roomWaiters = []; s.drainWaiters = [] }
            return s.roomWaiters + s.drainWaiters
        }
        for c in waiters { c.resume() }
    }

    /// Sends queued revisions while slots are free (on the loop), and wakes the feed when the
    /// queue has room or everything is answered.
    private func pump(releasing released: Int = 0) {
        let (toSend, waiters) = state.withLock { s -> ([(message: BLIPMessage, handler: ResultHandler)], [CheckedContinuation<Void, Never>]) in
            s.available += released
            guard s.error == nil else { return ([], []) }
            let n = min(s.available, s.queued)
            var batch: [(message: BLIPMessage, handler: ResultHandler)] = []
            batch.reserveCapacity(n)
            for i in s.head..<s.head + n {
                if let e = s.queue[i] { batch.append(e) }
                s.queue[i] = nil
            }
            s.head += n
            s.available -= n
            // Drop the sent prefix when the queue empties, or once it dominates.
            if s.head == s.queue.count {
                s.queue.removeAll(keepingCapacity: true)
                s.head = 0
            } else if s.head > 256 && s.head * 2 > s.queue.count {
                s.queue.removeFirst(s.head)
                s.head = 0
            }
            var wake: [CheckedContinuation<Void, Never>] = []
            if s.queued <= capacity / 2 { wake += s.roomWaiters; s.roomWaiters = [] }
            if s.queued == 0 && s.available == capacity { wake += s.drainWaiters; s.drainWaiters = [] }
            return (batch, wake)
        }
        if !toSend.isEmpty { onSent(toSend.count) }
        for (message, handler) in toSend {
            connection.send(message) { [self] result in
                handler(result)
                switch result {
                case .success, .failure(.errorResponse): break
                case .failure(let e): fail(ReplicationError(e))
                }
                pump(releasing: 1)
            }
        }
        for c in waiters { c.resume() }
    }
}
