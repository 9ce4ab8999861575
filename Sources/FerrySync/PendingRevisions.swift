import Synchronization

/// The pulled revisions received and not yet stored (their attachments downloading, or waiting
/// for the writer), and the gate a puller's `changes` handling waits at: past `limit`, no more
/// `changes` are answered until the writer catches up (as LiteCore's `kMaxPendingRevs`). So a
/// peer that sends revisions as fast as it can, with no window of its own, cannot pile them up
/// in memory: it only sends what was asked for.
final class PendingRevisions: Sendable {
    let limit: Int
    private struct State {
        var count = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
    }
    private let state = Mutex(State())

    /// A gate for at most `limit` (at least 1) pending revisions.
    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many are pending now.
    var count: Int { state.withLock { $0.count } }

    /// A revision arrived.
    func received() {
        state.withLock { $0.count += 1 }
    }

    /// A revision was stored or refused.
    func finished() {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.count -= 1
            guard s.count <= limit else { return [] }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in ready { w.resume() }
    }

    /// Returns once at most `limit` revisions are pending, or the gate is closed.
    func waitForRoom() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.closed || s.count <= limit { return true }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Lets every waiter (and every later one) through: the pull is ending.
    func close() {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.closed = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in ready { w.resume() }
    }
}
