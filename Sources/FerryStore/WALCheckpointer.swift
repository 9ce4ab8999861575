import CSQLite
import Dispatch
import Synchronization

/// Runs the WAL checkpoints of a database on a thread of its own, through a connection of its
/// own, instead of inside whichever commit crossed SQLite's auto-checkpoint threshold: that
/// commit (copying up to `threshold` pages — tens of MiB — into the database file) held the
/// writer and stalled a replication's pipeline while the other core idled.
///
/// Checkpoints are PASSIVE (they never wait for readers or the writer). A background pass
/// cannot finish the job while commits stream in — frames appended during its copy remain —
/// so once it has caught up to within a few frames, the writer's next commit copies that
/// remainder itself (a small PASSIVE checkpoint on its own connection). With every frame
/// copied, the transaction after it starts the WAL over from its beginning, rewriting file
/// pages already in the kernel's page cache; otherwise the WAL would grow through a whole
/// bulk load, each frame a fresh page for the kernel to allocate (twice the cost of a rewrite
/// here, and a pull's WAL writes were 14% of its CPU).
///
/// If checkpoints fall behind — the WAL reaches four times the threshold, e.g. on a loaded
/// machine or behind a long read — the committing writer runs a FULL checkpoint itself (after
/// the background one in progress, if any), so the WAL stays bounded: the writer is slowed
/// rather than the file left to grow. Durability is unchanged: a checkpoint only copies
/// committed pages, with the same `synchronous` setting as the writer.
///
/// Safety of `@unchecked Sendable`: `connection` is used only on `queue`; everything else is
/// immutable or behind `state`.
final class WALCheckpointer: @unchecked Sendable {
    let path: String
    let threshold: Int32
    let synchronous: String
    private let queue = DispatchQueue(label: "ferry.store.checkpoint")
    private struct State {
        var scheduled = false
        var closed = false
        /// A background pass left only the frames appended during it: the writer copies them.
        var caughtUp = false
    }
    private let state = Mutex(State())
    /// A background pass that copied fewer new frames than this is the last before the
    /// writer's own small checkpoint finishes the job.
    static let remainderFrames: Int32 = 256
    private var connection: Connection?
    /// Runs on the checkpoint thread after each background pass (tests: a commit landing
    /// while a pass copies).
    private let afterPass: (@Sendable () -> Void)?

    init(path: String, thresholdPages: Int, synchronous: String, afterPass: (@Sendable () -> Void)? = nil) {
        self.afterPass = afterPass
        self.path = path
        self.threshold = Int32(clamping: max(1, thresholdPages))
        self.synchronous = synchronous
    }

    /// Takes over auto-checkpointing of the write connection `db` (replacing SQLite's own hook).
    func install(on db: OpaquePointer) {
        sqlite3_wal_hook(db, { context, db, _, pages in
            guard let context, let db else { return SQLITE_OK }
            Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(db: db, walPages: pages)
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Removes the hook (before the write connection closes).
    func uninstall(from db: OpaquePointer) {
        sqlite3_wal_hook(db, nil, nil)
    }

    /// Called by SQLite on the writer's thread after each commit, with the WAL's size in pages.
    private func committed(db: OpaquePointer, walPages: Int32) {
        if walPages >= threshold &* 4 {
            // FULL copies every frame (waiting for readers), so the next write restarts the
            // WAL. SQLite does not wait for the checkpoint lock, though: while the background
            // checkpoint holds it the call returns BUSY at once, so wait for that one to end
            // (this queue is serial) and try again.
            if sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_FULL, nil, nil) == SQLITE_BUSY {
                waitUntilIdle()
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_FULL, nil, nil)
            }
            return
        }
        if state.withLock({ s in defer { s.caughtUp = false }; return s.caughtUp }) {
            // Only what was appended during the background pass is left (a few commits):
            // copied here, the next transaction starts the WAL over.
            _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return
        }
        guard walPages >= threshold else { return }
        let start = state.withLock { s -> Bool in
            guard !s.scheduled, !s.closed else { return false }
            s.scheduled = true
            return true
        }
        if start { queue.async { self.checkpoint() } }
    }

    private func checkpoint() {
        defer { state.withLock { $0.scheduled = false } }
        guard !state.withLock({ $0.closed }) else { return }
        if connection == nil {
            guard let c = try? Connection(path: path, readOnly: false, create: false) else { return }
            try? c.execute("PRAGMA synchronous=\(synchronous)")
            // This connection never auto-checkpoints on its own account (it never writes).
            _ = try? c.strings("PRAGMA wal_autocheckpoint=0")
            connection = c
        }
        guard let c = connection else { return }
        // Each pass copies what the writer appended during the one before; a few passes
        // shrink that to a remainder small enough for the writer to copy without a stall.
        var frames: Int32 = 0, previous: Int32 = 0
        for _ in 0..<4 {
            guard sqlite3_wal_checkpoint_v2(c.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &frames, nil) == SQLITE_OK else { return }
            afterPass?()
            if frames - previous < Self.remainderFrames {
                state.withLock { $0.caughtUp = true }
                return
            }
            previous = frames
        }
    }

    /// Waits until no background checkpoint is running.
    func waitUntilIdle() {
        queue.sync {}
    }

    /// Stops checkpointing and closes the connection (waits for a checkpoint in progress).
    func close() {
        state.withLock { $0.closed = true }
        queue.sync {
            connection?.close()
            connection = nil
        }
    }
}
