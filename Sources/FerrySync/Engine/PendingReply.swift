import FerryBLIP
import Synchronization

/// The reply to a request sent now and awaited later: the request goes out (in order with
/// everything else sent from this task) when `send` is called, and `value` suspends until the
/// reply is in. What lets a pull feed ask about its next batch while it still sends the
/// revisions of the previous one.
final class PendingReply: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<BLIPMessage, BLIPError>, Never>?)
        case done(Result<BLIPMessage, BLIPError>)
    }
    private let state = Mutex(State.waiting(nil))

    /// Sends `request` on `connection` at once and keeps its reply for `value`.
    static func send(_ request: BLIPMessage, on connection: BLIPConnection) -> PendingReply {
        let pending = PendingReply()
        connection.send(request) { pending.complete($0) }
        return pending
    }

    private func complete(_ result: Result<BLIPMessage, BLIPError>) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<BLIPMessage, BLIPError>, Never>? in
            guard case .waiting(let w) = s else { return nil }
            s = .done(result)
            return w
        }
        waiter?.resume(returning: result)
    }

    /// The reply (or the failure), once it is in. Awaited by one task only.
    var value: BLIPMessage {
        get async throws(BLIPError) {
            let result = await withCheckedContinuation { (c: CheckedContinuation<Result<BLIPMessage, BLIPError>, Never>) in
                let ready = state.withLock { s -> Result<BLIPMessage, BLIPError>? in
                    switch s {
                    case .done(let r): return r
                    case .waiting: s = .waiting(c); return nil
                    }
                }
                if let ready { c.resume(returning: ready) }
            }
            return try result.get()
        }
    }
}
