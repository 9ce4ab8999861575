import FerryStore
import Synchronization

/// One attachment a download policy wants, waiting for its turn.
struct AttachmentDownload: Sendable, Equatable {
    let documentID: String
    let revisionID: String
    let name: String
    let digest: BlobDigest
    let length: Int64
    let priority: Int
    /// When its revision arrived (`AttachmentDownloadQueue.nextArrival()`): the order among
    /// equal priorities, whatever order the revisions were stored in.
    let arrival: UInt64
}

/// The attachments a pull with a download policy still has to fetch: the highest priority
/// first, equal priorities in the order their revisions arrived (one FIFO per priority —
/// policies use a handful of priorities, so finding the highest is a scan of a few keys).
/// Revisions with attachments are parsed on tasks of their own and may be stored out of order,
/// so an item is placed by its arrival number, a short walk back from the end of its FIFO.
///
/// The `Replicator` owns it, not a session: a download cut off with its connection is queued
/// again at the front of its priority, and the next session goes on with it once its pull has
/// caught up. What is queued when the replicator goes away stays unfetched in the database,
/// where `Replicator.fetchAttachments` finds it.
final class AttachmentDownloadQueue: Sendable {
    /// The policy that fills the queue.
    let policy: AttachmentDownloadPolicy
    /// Where downloads (and their failures) are reported.
    let onEvent: @Sendable (AttachmentEvent) -> Void

    private struct FIFO {
        var items: [AttachmentDownload] = []
        var head = 0
        var isEmpty: Bool { head == items.count }
    }

    private struct State {
        var byPriority: [Int: FIFO] = [:]
        var count = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
        var nextArrival: UInt64 = 0
    }

    private let state = Mutex(State())

    init(policy: AttachmentDownloadPolicy, onEvent: @escaping @Sendable (AttachmentEvent) -> Void) {
        self.policy = policy
        self.onEvent = onEvent
    }

    /// Attachments waiting.
    var count: Int { state.withLock { $0.count } }

    /// The arrival number for a revision that has just come (called in arrival order, on the
    /// connection's event loop).
    func nextArrival() -> UInt64 {
        state.withLock { s in
            s.nextArrival += 1
            return s.nextArrival
        }
    }

    /// Queues `items` among those of their priorities by arrival, after any that arrived with
    /// them (a revision's attachments stay in name order), and wakes a waiting drain. A download
    /// that was cut off is queued again the same way, and so goes back to where it was.
    func enqueue(_ items: [AttachmentDownload]) {
        guard !items.isEmpty else { return }
        let waiters = state.withLock { s in
            for item in items {
                var fifo = s.byPriority.removeValue(forKey: item.priority) ?? FIFO()
                var at = fifo.items.count
                while at > fifo.head && fifo.items[at - 1].arrival > item.arrival { at -= 1 }
                if at == fifo.head && fifo.head > 0 {
                    // In front of everything waiting: reuse the slot of the last one taken.
                    fifo.head -= 1
                    fifo.items[fifo.head] = item
                } else {
                    fifo.items.insert(item, at: at)
                }
                s.byPriority[item.priority] = fifo
            }
            s.count += items.count
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume() }
    }

    /// Takes the next download: the oldest of the highest priority.
    func pop() -> AttachmentDownload? {
        state.withLock { s in
            guard let top = s.byPriority.keys.max(), var fifo = s.byPriority.removeValue(forKey: top) else { return nil }
            let item = fifo.items[fifo.head]
            fifo.head += 1
            if !fifo.isEmpty {
                // Drop what was taken now and then, so a long pull does not keep every item.
                if fifo.head > 1024 && fifo.head * 2 > fifo.items.count {
                    fifo.items.removeFirst(fifo.head)
                    fifo.head = 0
                }
                s.byPriority[top] = fifo
            }
            s.count -= 1
            return item
        }
    }

    /// Returns once something is queued, or when the calling task is cancelled.
    func waitForItems() async {
        let id = state.withLock { s in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    // Checked under the lock: a cancellation that ran its handler before this
                    // registration is seen here, one after it finds the waiter.
                    if s.count > 0 || Task.isCancelled { return true }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
