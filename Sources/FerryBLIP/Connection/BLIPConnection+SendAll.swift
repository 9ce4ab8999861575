import Synchronization

extension BLIPConnection {
    /// Sends all `messages` at once (BLIP multiplexes them) and returns their results in order
    /// once every one has completed. One continuation and one hop to the loop for the whole
    /// batch, not one per message. The results are in the order of `messages`; each is the
    /// reply, an error response, or the failure that ended the connection.
    public func sendAll(_ messages: [BLIPMessage]) async -> [Result<BLIPMessage, BLIPError>] {
        guard !messages.isEmpty else { return [] }
        final class Collector: Sendable {
            let state: Mutex<(results: [Result<BLIPMessage, BLIPError>?], remaining: Int)>
            init(_ n: Int) { state = Mutex((Array(repeating: nil, count: n), n)) }
        }
        let collector = Collector(messages.count)
        return await withCheckedContinuation { (c: CheckedContinuation<[Result<BLIPMessage, BLIPError>], Never>) in
            send(messages) { i, r in
                let done = collector.state.withLock { s -> [Result<BLIPMessage, BLIPError>]? in
                    s.results[i] = r
                    s.remaining -= 1
                    return s.remaining == 0 ? s.results.compactMap { $0 } : nil
                }
                if let done { c.resume(returning: done) }
            }
        }
    }
}
