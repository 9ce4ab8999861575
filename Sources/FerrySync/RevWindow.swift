import Synchronization

/// The `rev` messages a pull feed has sent and not yet seen answered, bounded: the feed sends
/// the next batch's `changes` and revisions while the puller still stores the previous ones
/// (no round trip between batches), yet never has more than `capacity` revisions unacknowledged —
/// so a puller killed at any point is re-sent at most that many (the rest it already stored, and
/// answers "have it" for). The first connection failure of any revision is kept and ends the feed.
final class RevWindow: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        var error: ReplicationError?
    }

    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        state = Mutex(State(available: max(1, capacity)))
    }

    /// Throws the failure that ended the feed, if one happened.
    func check() throws(ReplicationError) {
        if let e = state.withLock({ $0.error }) { throw e }
    }

    /// Takes a slot for one revision, waiting while the window is full.
    func acquire() async throws(ReplicationError) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.available > 0 || s.error != nil { s.available -= s.error == nil ? 1 : 0; return true }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        try check()
    }

    /// Gives a slot back once its revision was answered (or failed).
    func release() {
        let resume = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if !s.waiters.isEmpty { return [s.waiters.removeFirst()] }
            s.available += 1
            guard s.available == capacity else { return [] }
            defer { s.drainWaiters = [] }
            return s.drainWaiters
        }
        for c in resume { c.resume() }
    }

    /// Records a failure that ends the feed and wakes everyone waiting.
    func fail(_ error: ReplicationError) {
        let resume = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.error == nil { s.error = error }
            defer { s.waiters = []; s.drainWaiters = [] }
            return s.waiters + s.drainWaiters
        }
        for c in resume { c.resume() }
    }

    /// Waits until every revision sent was answered; throws the failure if one ended the feed.
    func drain() async throws(ReplicationError) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.available == capacity || s.error != nil { return true }
                s.drainWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        try check()
    }
}
