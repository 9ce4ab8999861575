import FerryBLIP
import Synchronization

/// Requests waiting for one consumer, handed over all at once: a consumer that wakes takes
/// everything queued since it last looked, so a burst of small messages (a client proposing
/// one revision per message) is answered together — one store read, one hop — rather than
/// one wake-up each.
final class RequestQueue: Sendable {
    private struct State {
        var items: [BLIPIncomingRequest] = []
        var waiter: CheckedContinuation<[BLIPIncomingRequest]?, Never>?
        var finished = false
    }
    private let state = Mutex(State())

    /// Queues a request (dropped once the queue is finished).
    func append(_ request: BLIPIncomingRequest) {
        let handOver = state.withLock { s -> (CheckedContinuation<[BLIPIncomingRequest]?, Never>, [BLIPIncomingRequest])? in
            guard !s.finished else { return nil }
            guard let w = s.waiter else { s.items.append(request); return nil }
            s.waiter = nil
            return (w, [request])
        }
        if let (w, items) = handOver { w.resume(returning: items) }
    }

    /// Everything queued, in arrival order, once there is something; nil once finished and empty.
    func next() async -> [BLIPIncomingRequest]? {
        await withCheckedContinuation { (c: CheckedContinuation<[BLIPIncomingRequest]?, Never>) in
            let now = state.withLock { s -> [BLIPIncomingRequest]?? in
                if !s.items.isEmpty { defer { s.items = [] }; return .some(s.items) }
                if s.finished { return .some(nil) }
                s.waiter = c
                return .none
            }
            if case .some(let items) = now { c.resume(returning: items) }
        }
    }

    /// Takes no more requests; the consumer gets what is queued, then nil.
    func finish() {
        let w = state.withLock { s -> CheckedContinuation<[BLIPIncomingRequest]?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.items.isEmpty ? s.waiter : nil
        }
        w?.resume(returning: nil)
    }
}
