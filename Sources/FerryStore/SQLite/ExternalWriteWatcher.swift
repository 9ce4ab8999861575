import Dispatch
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Notices commits made to the database file by other processes (other `ferry` commands on a
/// file that `ferry serve` has open): inotify on the WAL file wakes it, and the writer re-reads
/// the sequence counter, so live change feeds — continuous replications — see those changes
/// without polling. Linux only; elsewhere it does nothing.
///
/// inotify also fires for this process's own writes, so events are coalesced into one chain of
/// checks, and a check never waits for the writer: a busy writer is this process's own
/// transaction. While this process commits, the watcher does not watch at all: each of its own
/// transactions re-reads the sequence counter when it begins (so it catches up with every commit
/// made before it), so the watch is removed at the first event that comes with an own commit
/// and added back once the writer has committed nothing for `ownWritesPause`, followed at once
/// by the chain of checks (which sees a commit made while nothing watched). A watch costs every
/// `pwrite` to the WAL an event queued in the kernel: ~0.4 µs per document a push stores, ~1.3
/// when a client pushes one document per round (docs/performance.md).
final class ExternalWriteWatcher: Sendable {
    // Safe: set once in init and afterwards only cancelled, which Dispatch allows from any thread.
    nonisolated(unsafe) private let source: DispatchSourceRead?
    /// The inotify watch on the WAL, removed while this process commits.
    private let watchState: WALWatch?

    /// After the last WAL event, checks run at these delays (ms): the last write to the WAL
    /// (the commit frame) comes just before the other process publishes the commit in the
    /// shared-memory index, which inotify cannot see, so a commit is never missed for want of a
    /// later write.
    static let followUps = [0, 5, 25, 100, 400]
    /// How long the watcher stops reading events after each wake-up.
    static let pause = DispatchTimeInterval.milliseconds(2)
    /// How long the writer must commit nothing before the watch is added back, and how often
    /// that is looked at meanwhile. (A profile of 64 connections of `_bulk_docs` put ~5 % of
    /// `ferry serve` in this watcher and Dispatch's timers for it when it woke every 2 ms.)
    static let ownWritesPause = DispatchTimeInterval.milliseconds(20)
    /// How soon a check that found the writer busy runs again.
    static let busyRetry = DispatchTimeInterval.milliseconds(5)

    init(path: String, writer: Writer) {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        let watch = fd >= 0 ? WALWatch(fd: fd, path: path + "-wal") : nil
        guard let watch, watch.add() else {
            if fd >= 0 { Glibc.close(fd) }
            source = nil
            watchState = nil
            return
        }
        watchState = watch
        let queue = DispatchQueue(label: "ferry.store.watch")
        let chain = CheckChain(queue: queue, writer: writer)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        // One buffer for every drain (the handler runs often while another process writes);
        // only the handler, serial on `queue`, touches it.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        let pausable = Pausable(source)
        source.setEventHandler {
            // Drain the events; what changed is read from the database itself.
            while read(fd, buffer.baseAddress, buffer.count) > 0 {}
            // Unwatched: what is left is the removal's own event (or writes from before it).
            guard watch.isWatching else { return }
            if chain.noteOwnCommits() {
                // This process is writing: its transactions catch up by themselves; watch again
                // once they stop.
                watch.remove()
                Self.rewatchWhenIdle(watch, chain: chain, queue: queue)
                return
            }
            chain.restart()
            // Then stop listening for a moment: inotify folds the writes of that moment into
            // one queued event, so a burst costs one wake-up per pause instead of one per
            // write. The resume always runs, so the source is never released suspended.
            pausable.source.suspend()
            queue.asyncAfter(deadline: .now() + Self.pause) { pausable.source.resume() }
        }
        source.setCancelHandler {
            watch.cancel()
            Glibc.close(fd)
            buffer.deallocate()
        }
        source.resume()
        self.source = source
        #else
        source = nil
        watchState = nil
        #endif
    }

    #if os(Linux)
    /// Adds the watch back once the writer has committed nothing for `ownWritesPause`, then
    /// starts the checks, which find a commit made by another process while nothing watched.
    private static func rewatchWhenIdle(_ watch: WALWatch, chain: CheckChain, queue: DispatchQueue,
                                        after delay: DispatchTimeInterval = ownWritesPause) {
        queue.asyncAfter(deadline: .now() + delay) {
            guard !watch.isCancelled else { return }
            if chain.noteOwnCommits() { return rewatchWhenIdle(watch, chain: chain, queue: queue) }
            // The WAL cannot be watched now (removed, out of watches): try again less often.
            guard watch.add() else {
                return rewatchWhenIdle(watch, chain: chain, queue: queue, after: .milliseconds(followUps[followUps.count - 1]))
            }
            chain.restart()
        }
    }
    #endif

    /// Whether the WAL is watched now (tests: not while this process commits).
    var isWatching: Bool { watchState?.isWatching ?? false }

    /// An inotify watch for writes to one file, which can be removed and added again.
    private final class WALWatch: Sendable {
        let fd: Int32
        let path: String
        private struct State {
            /// The watch descriptor while watching.
            var descriptor: Int32?
            var cancelled = false
        }
        private let state = Mutex(State())

        init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        var isWatching: Bool { state.withLock { $0.descriptor != nil } }
        var isCancelled: Bool { state.withLock { $0.cancelled } }

        /// Watches the file (again); false if it cannot be watched now.
        func add() -> Bool {
            state.withLock { s in
                guard !s.cancelled else { return false }
                #if os(Linux)
                if s.descriptor == nil {
                    let wd = inotify_add_watch(fd, path, UInt32(IN_MODIFY))
                    if wd >= 0 { s.descriptor = wd }
                }
                #endif
                return s.descriptor != nil
            }
        }

        /// Stops watching until `add()`.
        func remove() {
            state.withLock { Self.remove(&$0, fd: fd) }
        }

        /// Ends the watch for good (its descriptor is closed next).
        func cancel() {
            state.withLock { s in
                Self.remove(&s, fd: fd)
                s.cancelled = true
            }
        }

        private static func remove(_ s: inout State, fd: Int32) {
            #if os(Linux)
            if let wd = s.descriptor { _ = inotify_rm_watch(fd, wd) }
            #endif
            s.descriptor = nil
        }
    }

    func stop() { source?.cancel() }

    /// The source, for its own event handler to pause it. The cycle this makes (source →
    /// handler → source) ends at `stop()`: Dispatch releases a cancelled source's handlers.
    ///
    /// Safety of `@unchecked Sendable`: only suspended and resumed, on the source's own queue.
    private final class Pausable: @unchecked Sendable {
        let source: DispatchSourceRead
        init(_ source: DispatchSourceRead) { self.source = source }
    }

    /// The follow-up checks after the latest WAL event: a new event restarts the schedule
    /// instead of adding another, so a burst of writes costs one chain of checks.
    ///
    /// Safety of `@unchecked Sendable`: every field is touched only on `queue` (the event
    /// handler and the timers it schedules run there).
    private final class CheckChain: @unchecked Sendable {
        let queue: DispatchQueue
        weak var writer: Writer?
        /// Which follow-up runs next.
        var step = 0
        /// Identifies the one live timer: timers of an older schedule find it changed and stop.
        var generation = 0
        /// When the live timer fires; nil when the chain is idle.
        var due: DispatchTime?
        /// The writer's commit count when last looked at (`noteOwnCommits`).
        var commitsSeen: Int

        init(queue: DispatchQueue, writer: Writer) {
            self.queue = queue
            self.writer = writer
            commitsSeen = writer.commits
        }

        /// Whether this process's writer committed since the last call.
        func noteOwnCommits() -> Bool {
            guard let commits = writer?.commits else { return false }
            defer { commitsSeen = commits }
            return commits != commitsSeen
        }

        /// Starts the follow-up checks over, the first now.
        func restart() {
            step = 0
            // A timer due within `busyRetry` serves the new event too; a later one (the chain
            // waiting out its long follow-ups) is replaced.
            if let due, due <= .now() + ExternalWriteWatcher.busyRetry { return }
            schedule(after: .milliseconds(0))
        }

        private func schedule(after delay: DispatchTimeInterval) {
            generation &+= 1
            let mine = generation
            let at = DispatchTime.now() + delay
            due = at
            queue.asyncAfter(deadline: at) { self.fire(mine) }
        }

        private func fire(_ mine: Int) {
            guard mine == generation else { return }
            due = nil
            guard let writer else { return }
            guard writer.noticeExternalCommits() else {
                // Busy: with its own transactions still committing, the last of them will have
                // caught up, and a later commit by another process wakes the watcher anyway.
                schedule(after: noteOwnCommits() ? ExternalWriteWatcher.ownWritesPause : ExternalWriteWatcher.busyRetry)
                return
            }
            let next = step + 1
            guard next < ExternalWriteWatcher.followUps.count else { return }
            let wait = ExternalWriteWatcher.followUps[next] - ExternalWriteWatcher.followUps[step]
            step = next
            schedule(after: .milliseconds(wait))
        }
    }
}
