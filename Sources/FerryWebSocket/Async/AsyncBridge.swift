import FerryNet
import Synchronization

/// Connects a loop-level `WebSocketConnection` to the async `WebSocket` API: buffers inbound
/// messages for one reader (pausing the socket when the buffer is full), parks senders while
/// the socket is not writable, and records how the connection ended.
///
/// Safety of `@unchecked Sendable`: `connection`, `writers` and `onOpen` are touched only on the
/// connection's loop; everything a reader touches from its own task is behind `state`'s Mutex.
final class AsyncBridge: WebSocketHandler, @unchecked Sendable {
    struct Closure: Sendable, Equatable {
        var code: CloseCode
        var reason: String
        var error: WebSocketError?
    }

    struct State {
        var queue: [WebSocketMessage] = []
        var head = 0
        var reader: CheckedContinuation<WebSocketMessage?, Error>?
        var paused = false
        var closure: Closure?
        var closeWaiters: [CheckedContinuation<Closure, Never>] = []
        var count: Int { queue.count - head }
    }

    let state = Mutex(State())
    let limit: Int
    var connection: WebSocketConnection?
    private var writers: [CheckedContinuation<Void, Error>] = []
    var onOpen: ((WebSocketConnection) -> Void)?

    init(limit: Int) { self.limit = max(1, limit) }

    // MARK: WebSocketHandler (loop thread)

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        self.connection = connection
        onOpen?(connection)
        onOpen = nil
    }

    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer) {
        let message: WebSocketMessage = kind == .text
            ? .text(String(decoding: payload, as: UTF8.self)) : .binary(Array(payload))
        let (reader, pause) = state.withLock { s -> (CheckedContinuation<WebSocketMessage?, Error>?, Bool) in
            if let r = s.reader { s.reader = nil; return (r, false) }
            s.queue.append(message)
            if s.count >= limit && !s.paused { s.paused = true; return (nil, true) }
            return (nil, false)
        }
        reader?.resume(returning: message)
        if pause { connection.pauseReading() }
    }

    func webSocket(_ connection: WebSocketConnection, writabilityChanged writable: Bool) {
        guard writable else { return }
        let w = writers
        writers = []
        for c in w { c.resume() }
    }

    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?) {
        let closure = Closure(code: code, reason: reason, error: error)
        let (reader, waiters) = state.withLock { s in
            s.closure = closure
            let r = s.reader; s.reader = nil
            let w = s.closeWaiters; s.closeWaiters = []
            return (r, w)
        }
        if let reader {
            if let e = closure.error { reader.resume(throwing: e) } else { reader.resume(returning: nil) }
        }
        for w in waiters { w.resume(returning: closure) }
        let ws = writers
        writers = []
        for c in ws { c.resume(throwing: error ?? .closed(code: code, reason: reason)) }
        onOpen = nil
    }

    // MARK: Reader side (any task)

    func next() async throws -> WebSocketMessage? {
        if let m = popBuffered() { return m }
        return try await withCheckedThrowingContinuation { c in
            let immediate: Result<WebSocketMessage?, Error>? = state.withLock { s in
                if s.count > 0 {
                    let m = s.queue[s.head]; s.head += 1; compact(&s)
                    return .success(m)
                }
                // A clean close ends iteration; a failed connection throws its error.
                if let closure = s.closure {
                    if let e = closure.error { return .failure(e) }
                    return .success(nil)
                }
                s.reader = c
                return nil
            }
            if let immediate { c.resume(with: immediate) }
            resumeReadingIfDrained()
        }
    }

    private func popBuffered() -> WebSocketMessage? {
        let m = state.withLock { s -> WebSocketMessage? in
            guard s.count > 0 else { return nil }
            let m = s.queue[s.head]; s.head += 1; compact(&s)
            return m
        }
        if m != nil { resumeReadingIfDrained() }
        return m
    }

    private func compact(_ s: inout State) {
        if s.head == s.queue.count { s.queue.removeAll(keepingCapacity: true); s.head = 0 }
        else if s.head > 1024 { s.queue.removeFirst(s.head); s.head = 0 }
    }

    private func resumeReadingIfDrained() {
        let resume = state.withLock { s -> Bool in
            if s.paused && s.count <= limit / 2 { s.paused = false; return true }
            return false
        }
        if resume, let conn = connectionForOtherThreads {
            conn.loop.execute { conn.resumeReading() }
        }
    }

    /// Set once at open, before the bridge is shared with other tasks.
    nonisolated(unsafe) var connectionForOtherThreads: WebSocketConnection?

    func waitForClose() async -> Closure {
        await withCheckedContinuation { c in
            let done = state.withLock { s -> Closure? in
                if let cl = s.closure { return cl }
                s.closeWaiters.append(c)
                return nil
            }
            if let done { c.resume(returning: done) }
        }
    }

    // MARK: Writer side (loop thread)

    /// Parks a sender until the socket drains below its low watermark.
    func parkWriter(_ c: CheckedContinuation<Void, Error>) { writers.append(c) }
}
