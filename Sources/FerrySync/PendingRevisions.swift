import Synchronization

/// The revisions a puller asked for and has not stored yet (on their way, their attachments
/// downloading, or queued for the writer), and the gate its `changes` handling waits at: while
/// more than `limit` are pending, the next `changes` message is neither decoded nor answered.
/// LiteCore's puller stops the same way past `kMaxPendingRevs`, counting a revision until it
/// arrives; counting until it is stored bounds the writer's queue too. A feeder only sends what
/// was asked for, so however many `changes` messages it keeps in flight (a Sync Gateway, a
/// LiteCore peer), at most `limit` plus one batch are pending at once.
final class PendingRevisions: Sendable {
    let limit: Int
    private struct State {
        var count = 0
        var waiters: [CheckedContinuation<Bool, Never>] = []
        var closed = false
    }
    private let state = Mutex(State())

    /// A gate for at most `limit` (at least 1) pending revisions.
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many are pending now.
    var count: Int { state.withLock { $0.count } }

    /// How many callers are waiting for room now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// `n` more revisions were asked for.
    func requested(_ n: Int) {
        state.withLock { $0.count += max(0, n) }
    }

    /// A revision asked for is done with: stored, refused, malformed, its attachments could not
    /// be fetched, or the peer answered `norev`. (One that was never asked for cannot make the
    /// count negative.)
    func finished() {
        let ready = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.count = max(0, s.count - 1)
            guard s.count <= limit else { return [] }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in ready { w.resume(returning: true) }
    }

    /// Returns true once at most `limit` revisions are pending; false if the gate is closed
    /// (the pull is ending: take no more `changes`).
    func waitForRoom() async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let now = state.withLock { s -> Bool? in
                if s.closed { return false }
                if s.count <= limit { return true }
                s.waiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// Closes the gate: every waiter, and every later one, is told the pull is ending.
    func close() {
        let ready = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.closed = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in ready { w.resume(returning: false) }
    }
}
