import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Notices commits made to the database file by other processes (other `ferry` commands on a
/// file that `ferry serve` has open): inotify on the WAL file wakes it, and the writer re-reads
/// the sequence counter, so live change feeds — continuous replications — see those changes
/// without polling. Linux only; elsewhere it does nothing.
///
/// inotify also fires for this process's own writes — thousands of times a second while a
/// replication stores documents — so events are coalesced into one chain of checks, and a check
/// never waits for the writer: a busy writer is this process's own transaction. While this
/// process commits, the watcher looks ten times less often: each of its own transactions
/// re-reads the sequence counter when it begins (so it catches up with every commit made before
/// it), and a commit made after its last one writes the WAL again, which wakes the watcher.
final class ExternalWriteWatcher: Sendable {
    // Safe: set once in init and afterwards only cancelled, which Dispatch allows from any thread.
    nonisolated(unsafe) private let source: DispatchSourceRead?

    /// After the last WAL event, checks run at these delays (ms): the last write to the WAL
    /// (the commit frame) comes just before the other process publishes the commit in the
    /// shared-memory index, which inotify cannot see, so a commit is never missed for want of a
    /// later write.
    static let followUps = [0, 5, 25, 100, 400]
    /// How long the watcher stops reading events after each wake-up.
    static let pause = DispatchTimeInterval.milliseconds(2)
    /// The pause, and the delay of the first check, when this process committed since the last
    /// wake-up (so the events were most likely its own). A profile of 64 connections of
    /// `_bulk_docs` put ~5 % of `ferry serve` in this watcher and Dispatch's timers for it at
    /// the 2 ms pause.
    static let ownWritesPause = DispatchTimeInterval.milliseconds(20)
    /// How soon a check that found the writer busy runs again.
    static let busyRetry = DispatchTimeInterval.milliseconds(5)

    init(path: String, writer: Writer) {
        #if os(Linux)
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0, inotify_add_watch(fd, path + "-wal", UInt32(IN_MODIFY)) >= 0 else {
            if fd >= 0 { Glibc.close(fd) }
            source = nil
            return
        }
        let queue = DispatchQueue(label: "ferry.store.watch")
        let chain = CheckChain(queue: queue, writer: writer)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        // One buffer for every drain (the handler runs thousands of times a second while this
        // process writes); only the handler, serial on `queue`, touches it.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        let pausable = Pausable(source)
        source.setEventHandler {
            // Drain the events; what changed is read from the database itself.
            while read(fd, buffer.baseAddress, buffer.count) > 0 {}
            let ownWrites = chain.noteOwnCommits()
            chain.restart(ownWrites: ownWrites)
            // Then stop listening for a moment: inotify folds the writes of that moment into
            // one queued event, so a burst costs one wake-up per pause instead of one per
            // write (a profile of a push put 6% of the receiving process in this queue). The
            // resume always runs, so the source is never released suspended.
            pausable.source.suspend()
            queue.asyncAfter(deadline: .now() + (ownWrites ? Self.ownWritesPause : Self.pause)) { pausable.source.resume() }
        }
        source.setCancelHandler {
            Glibc.close(fd)
            buffer.deallocate()
        }
        source.resume()
        self.source = source
        #else
        source = nil
        #endif
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

        /// Starts the follow-up checks over: the first now, or after `ownWritesPause` when the
        /// event came with this process's own commits.
        func restart(ownWrites: Bool) {
            step = 0
            // A timer due within `window` serves the new event too; a later one (the chain
            // waiting out its long follow-ups) is replaced.
            let (first, window) = ownWrites ? (ExternalWriteWatcher.ownWritesPause, ExternalWriteWatcher.ownWritesPause)
                                            : (DispatchTimeInterval.milliseconds(0), ExternalWriteWatcher.busyRetry)
            if let due, due <= .now() + window { return }
            schedule(after: first)
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
