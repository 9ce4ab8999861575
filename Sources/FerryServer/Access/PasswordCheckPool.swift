import CFerrySystem
import Dispatch
import FerryNet
import FoundationEssentials
import Synchronization

/// A few dedicated threads that run password checks (PBKDF2, about 0.2 s each at 600,000
/// iterations), so that neither an event loop nor Swift's cooperative pool — on which every
/// other request of the daemon runs — is held by one. The queue is bounded: a flood of
/// logins (a wrong-password attack, a herd of reconnecting replicators) gets `Busy` at once
/// instead of a wait that grows without end, and everyone else keeps being answered.
public final class PasswordCheckPool: Sendable {
    /// The queue is full: answer 503 and let the client retry.
    public struct Busy: Error, Sendable, Equatable {}

    /// The pool the daemon's access control uses: one thread per two cores (one or two, so a
    /// flood of checks leaves cores to everything else), up to 32 checks waiting (about 6 s
    /// of work on one thread).
    public static let shared = PasswordCheckPool(threads: max(1, min(2, ProcessInfo.processInfo.activeProcessorCount / 2)),
                                                 queueLimit: 32)

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var running = 0
    }

    private let state = Mutex(State())
    /// Counts queued jobs; each worker takes one per signal.
    private let available = DispatchSemaphore(value: 0)
    /// Checks that may wait beside the ones running.
    public let queueLimit: Int
    /// The number of worker threads.
    public let threads: Int

    /// A pool of `threads` workers (started now, kept for the life of the process) and at most
    /// `queueLimit` checks waiting.
    public init(threads: Int, queueLimit: Int) {
        self.threads = max(1, threads)
        self.queueLimit = max(0, queueLimit)
        for i in 0..<self.threads {
            do { try DetachedThread.start(name: "ferry-passwd-\(i)") { [self] in work() } } catch {
                // No thread (resource limits): the worker runs on libdispatch's pool instead,
                // still off the cooperative pool.
                DispatchQueue.global().async { [self] in work() }
            }
        }
    }

    /// Checks waiting for a thread now.
    public var waiting: Int { state.withLock { $0.jobs.count } }

    /// Runs `check` on a pool thread and returns its result; `Busy` at once when the queue is
    /// full, or when the caller's task is cancelled before a thread took the check (its
    /// client left: the check would be work for nobody). The caller's task waits without
    /// holding a thread.
    public func run<T: Sendable>(_ check: @escaping @Sendable () -> T) async throws(Busy) -> T {
        let abandoned = Abandoned()
        let outcome: T? = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
                let accepted = state.withLock { s -> Bool in
                    guard s.jobs.count < queueLimit || (s.jobs.isEmpty && s.running < threads) else { return false }
                    s.jobs.append { c.resume(returning: abandoned.flag.load(ordering: .acquiring) ? nil : check()) }
                    return true
                }
                if accepted { available.signal() } else { c.resume(returning: nil) }
            }
        } onCancel: {
            abandoned.flag.store(true, ordering: .releasing)
        }
        guard let outcome else { throw Busy() }
        return outcome
    }

    /// Set when the task that queued a check is cancelled.
    private final class Abandoned: Sendable { let flag = Atomic(false) }

    private func work() {
        // Below everything else the daemon does: a flood of checks takes the cores' spare
        // time, not the time of the requests being served.
        _ = ferry_lower_thread_priority(10)
        while true {
            available.wait()
            let job = state.withLock { s -> (@Sendable () -> Void)? in
                guard !s.jobs.isEmpty else { return nil }
                s.running += 1
                return s.jobs.removeFirst()
            }
            guard let job else { continue }
            job()
            state.withLock { $0.running -= 1 }
        }
    }
}
