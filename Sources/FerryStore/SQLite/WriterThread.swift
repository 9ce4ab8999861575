import CFerrySystem
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A database writer's own thread: runs submitted work one item at a time, in order. Not one
/// of Swift's cooperative pool, so the work may block (SQLite's lock, a commit, an fsync)
/// without taking a thread the event loops' tasks need; and, being only the writer's, it can
/// run at a lower scheduling priority than the threads that serve reads (`niceness`).
///
/// The thread starts with the first item and ends after `stop()` once the queue is empty. Each
/// time it wakes it takes everything queued (up to `maxBatch` items) and hands it to the batch
/// runner in order, so the writer can put work that queued up together into one commit.
final class WriterThread: Sendable {
    typealias Work = @Sendable () -> Void
    /// Runs items taken together, in order, on the writer's thread.
    typealias BatchRunner = @Sendable ([Work]) -> Void

    /// The most items one wake-up takes: bounds how long the first of them waits for its answer.
    static let maxBatch = 64

    private struct State {
        var queue: [Work] = []
        /// Runs the items of one wake-up; nil: one after the other.
        var runBatch: BatchRunner?
        var started = false
        var stopping = false
    }

    private let state = Mutex(State())
    /// Counts queued items (and the stop), so the thread sleeps while there are none.
    private let wake = DispatchSemaphore(value: 0)
    private let niceness: Int32

    /// `niceness`: added to the thread's nice value (Linux: per thread; 0 leaves it alone).
    init(niceness: Int32) {
        self.niceness = niceness
    }

    /// Sets what runs the items of one wake-up (by default, one after the other).
    func setBatchRunner(_ runBatch: @escaping BatchRunner) {
        state.withLock { $0.runBatch = runBatch }
    }

    /// Queues `work`; false (and nothing queued) after `stop()`.
    @discardableResult
    func submit(_ work: @escaping Work) -> Bool {
        let start = state.withLock { s -> Bool? in
            guard !s.stopping else { return nil }
            s.queue.append(work)
            defer { s.started = true }
            return !s.started
        }
        guard let start else { return false }
        if start { startThread() }
        wake.signal()
        return true
    }

    /// Items queued and not yet started.
    var queuedWork: Int { state.withLock { $0.queue.count } }

    /// Lets the thread end after what is queued; later `submit`s are refused.
    func stop() {
        let running = state.withLock { s -> Bool in
            defer { s.stopping = true }
            return s.started && !s.stopping
        }
        if running { wake.signal() }
    }

    private func startThread() {
        // The thread holds the object (a retained reference it releases when it ends).
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let me = Unmanaged<WriterThread>.fromOpaque(raw).takeRetainedValue()
            me.run()
            return nil
        }, context)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            // No thread (resource limits): the work runs on libdispatch's pool instead, still
            // off the cooperative pool, in order.
            Unmanaged<WriterThread>.fromOpaque(context).release()
            DispatchQueue.global().async { self.run() }
        }
    }

    /// The thread's name, as `top -H`, `perf` and /proc show it.
    static let name = "ferry-writer"

    private func run() {
        _ = ferry_name_thread(Self.name)
        if niceness > 0 { _ = ferry_lower_thread_priority(niceness) }
        while true {
            wake.wait()
            let (batch, runBatch) = state.withLock { s -> ([Work], BatchRunner?) in
                let n = min(s.queue.count, Self.maxBatch)
                defer { s.queue.removeFirst(n) }
                return (Array(s.queue.prefix(n)), s.runBatch)
            }
            // Woken with nothing queued: only `stop()` does that.
            guard !batch.isEmpty else { return }
            // One signal per item: the items taken beyond the first have theirs consumed here.
            for _ in 1..<batch.count { wake.wait() }
            if let runBatch { runBatch(batch) } else { for item in batch { item() } }
        }
    }
}
