import Synchronization

/// Fans values out to any number of `AsyncStream` subscribers and callbacks. Subscribers that
/// join late see only later values; `endStreams()` ends the streams subscribed so far (a
/// stopped replicator's), later subscribers get a fresh stream.
final class Broadcaster<Value: Sendable>: Sendable {
    private struct State {
        var streams: [Int: AsyncStream<Value>.Continuation] = [:]
        var callbacks: [Int: @Sendable (Value) -> Void] = [:]
        var nextID = 0
    }
    private let state = Mutex(State())
    /// Streams and callbacks subscribed now, readable without the lock: a sender with nothing
    /// to fan out to can skip building the value (one per document of a bulk transfer).
    private let subscribers = Atomic<Int>(0)

    /// Whether no stream or callback is subscribed (a value sent now would reach nobody).
    var isEmpty: Bool { subscribers.load(ordering: .relaxed) == 0 }

    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            s.nextID += 1
            s.streams[s.nextID] = continuation
            subscribers.add(1, ordering: .relaxed)
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in self?.remove(stream: id) }
        return stream
    }

    @discardableResult
    func addCallback(_ callback: @escaping @Sendable (Value) -> Void) -> Int {
        state.withLock { s in
            s.nextID += 1
            s.callbacks[s.nextID] = callback
            subscribers.add(1, ordering: .relaxed)
            return s.nextID
        }
    }

    func removeCallback(_ id: Int) {
        state.withLock { s in
            if s.callbacks.removeValue(forKey: id) != nil { subscribers.subtract(1, ordering: .relaxed) }
        }
    }

    private func remove(stream id: Int) {
        state.withLock { s in
            if s.streams.removeValue(forKey: id) != nil { subscribers.subtract(1, ordering: .relaxed) }
        }
    }

    func send(_ value: Value) {
        let (streams, callbacks) = state.withLock { ($0.streams.values, $0.callbacks.values) }
        for c in streams { c.yield(value) }
        for c in callbacks { c(value) }
    }

    func endStreams() {
        let streams = state.withLock { s in
            defer { s.streams = [:] }
            subscribers.subtract(s.streams.count, ordering: .relaxed)
            return s.streams.values
        }
        for c in streams { c.finish() }
    }
}
