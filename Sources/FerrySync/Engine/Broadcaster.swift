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

    func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            s.nextID += 1
            s.streams[s.nextID] = continuation
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.streams.removeValue(forKey: id) } }
        return stream
    }

    @discardableResult
    func addCallback(_ callback: @escaping @Sendable (Value) -> Void) -> Int {
        state.withLock { s in
            s.nextID += 1
            s.callbacks[s.nextID] = callback
            return s.nextID
        }
    }

    func removeCallback(_ id: Int) { state.withLock { _ = $0.callbacks.removeValue(forKey: id) } }

    func send(_ value: Value) {
        let (streams, callbacks) = state.withLock { ($0.streams.values, $0.callbacks.values) }
        for c in streams { c.yield(value) }
        for c in callbacks { c(value) }
    }

    func endStreams() {
        let streams = state.withLock { s in
            defer { s.streams = [:] }
            return s.streams.values
        }
        for c in streams { c.finish() }
    }
}
