import Synchronization

/// Wakes live change feeds when the database's last sequence moves past where they are.
/// Waiters are resumed outside the lock; a waiter that is cancelled or whose database closes
/// is resumed with false.
final class ChangeNotifier: Sendable {
    private struct State {
        var lastSequence: Int64
        var closed = false
        var nextID = 0
        var waiters: [Int: (after: Int64, continuation: CheckedContinuation<Bool, Never>)] = [:]
    }

    private let state: Mutex<State>

    init(lastSequence: Int64) {
        state = Mutex(State(lastSequence: lastSequence))
    }

    var lastSequence: Int64 { state.withLock { $0.lastSequence } }

    /// Called after a commit.
    func publish(_ sequence: Int64) {
        let ready = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.lastSequence = max(s.lastSequence, sequence)
            var out: [CheckedContinuation<Bool, Never>] = []
            for (id, w) in s.waiters where w.after < s.lastSequence {
                out.append(w.continuation)
                s.waiters[id] = nil
            }
            return out
        }
        for c in ready { c.resume(returning: true) }
    }

    func close() {
        let all = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.closed = true
            defer { s.waiters.removeAll() }
            return s.waiters.values.map(\.continuation)
        }
        for c in all { c.resume(returning: false) }
    }

    /// Returns true once the last sequence is above `after`; false if cancelled or closed.
    func wait(after: Int64) async -> Bool {
        let id = state.withLock { s -> Int in
            s.nextID += 1
            return s.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let immediate: Bool? = state.withLock { s in
                    if s.closed { return false }
                    if Task.isCancelled { return false }
                    if s.lastSequence > after { return true }
                    s.waiters[id] = (after, c)
                    return nil
                }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let c = state.withLock { s in s.waiters.removeValue(forKey: id)?.continuation }
            c?.resume(returning: false)
        }
    }
}
