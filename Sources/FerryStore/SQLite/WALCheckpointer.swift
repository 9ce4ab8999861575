import CSQLite
import Dispatch
import Synchronization

/// Runs the WAL checkpoints of a database on a thread of its own, through a connection of its
/// own, instead of inside whichever commit crossed SQLite's auto-checkpoint threshold: that
/// commit (copying up to `threshold` pages — tens of MiB — into the database file) held the
/// writer and stalled a replication's pipeline while the other core idled.
///
/// Checkpoints are PASSIVE (they never wait for readers or the writer). A background pass
/// cannot finish the job while commits stream in: it copies the WAL as it was when the pass
/// began, and frames appended meanwhile remain. So after a pass that copied everything it saw,
/// the writer's next commit looks at what was appended since: fewer than `remainderFrames`
/// (2 MiB of 8 KiB pages), it copies them itself (a PASSIVE checkpoint on its own connection,
/// which fsyncs the WAL and the database file like any checkpoint); more, it hands them to
/// another background pass. Once every frame is copied, the next transaction starts the WAL
/// over from its beginning, rewriting file pages already in the kernel's page cache; otherwise
/// the WAL would grow through a whole bulk load, each frame a fresh page for the kernel to
/// allocate (twice the cost of a rewrite here; a pull's WAL writes were 14% of its CPU).
///
/// If checkpoints fall behind — the WAL reaches four times the threshold, e.g. on a loaded
/// machine or behind a long read — the committing writer runs a FULL checkpoint itself (after
/// the background one in progress, if any), so the WAL stays bounded: the writer is slowed
/// rather than the file left to grow. Each background pass syncs the database file after
/// copying, so the writer's own small pass has only its own pages to sync. Durability is
/// unchanged: a checkpoint only copies committed pages, with the same `synchronous` setting as
/// the writer.
///
/// Safety of `@unchecked Sendable`: `connection` is used only on `queue`; everything else is
/// immutable or behind `state`.
final class WALCheckpointer: @unchecked Sendable {
    let path: String
    let threshold: Int32
    let synchronous: String
    private let queue = DispatchQueue(label: "ferry.store.checkpoint")
    private struct State {
        /// A background pass is queued or running.
        var scheduled = false
        /// `close()` was called: no more passes.
        var closed = false
        /// The WAL's size in frames when the last background pass began, if that pass copied
        /// all of it (no reader's snapshot held it back): the frames after it are the remainder.
        var copiedUpTo: Int32?
        /// Background passes that synced the database file themselves (tests).
        var databaseSyncs = 0
    }
    private let state = Mutex(State())
    /// The most frames the writer copies itself after a background pass; more go to another pass.
    static let remainderFrames: Int32 = 256
    private var connection: Connection?
    /// Run on the checkpoint thread around each background pass (tests: frames appended
    /// while a pass copies).
    private let beforePass: (@Sendable () -> Void)?
    private let afterPass: (@Sendable () -> Void)?

    init(path: String, thresholdPages: Int, synchronous: String,
         beforePass: (@Sendable () -> Void)? = nil, afterPass: (@Sendable () -> Void)? = nil) {
        self.beforePass = beforePass
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
        let copiedUpTo = state.withLock { s in defer { s.copiedUpTo = nil }; return s.copiedUpTo }
        if walPages >= threshold &* 4 {
            // FULL copies every frame (waiting for readers), so the next write restarts the
            // WAL. SQLite does not wait for the checkpoint lock, though: while a background
            // pass holds it the call returns BUSY at once, so wait for the pass to end (this
            // queue is serial) and try again.
            if sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_FULL, nil, nil) == SQLITE_BUSY {
                waitUntilIdle()
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_FULL, nil, nil)
            }
            return
        }
        // After a pass that copied all it saw, what came since is copied here if it is little,
        // else by another pass. (A WAL smaller than the pass saw has started over already.)
        if let copiedUpTo, walPages >= copiedUpTo {
            if walPages &- copiedUpTo < Self.remainderFrames {
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else {
                scheduleBackgroundPass()
            }
            return
        }
        if walPages >= threshold { scheduleBackgroundPass() }
    }

    private func scheduleBackgroundPass() {
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
        var log: Int32 = 0, copied: Int32 = 0
        beforePass?()
        guard sqlite3_wal_checkpoint_v2(c.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied) == SQLITE_OK else { return }
        // SQLite syncs the database file only after a pass that reached the WAL's end as it is
        // when the pass ends; while commits stream in, that is never, so every page a pass
        // copied stayed dirty for the writer's own remainder pass to sync: tens of MiB of
        // scattered pages, 90–290 ms of fdatasync on the writer's thread at every WAL restart
        // of a bulk load. Synced here, the writer syncs only the few pages it copies itself.
        if copied > 0, Self.syncDatabaseFile(of: c) { state.withLock { $0.databaseSyncs += 1 } }
        afterPass?()
        // Short of `log`, a reader's snapshot held the pass back: the WAL cannot start over
        // until that reader moves on, and the next commit past the threshold tries again.
        if copied == log { state.withLock { $0.copiedUpTo = log } }
    }

    /// Syncs the database file through SQLite's own handle of `connection`, not a descriptor
    /// of ours: closing another descriptor of the file would drop the process's POSIX locks on it.
    private static func syncDatabaseFile(of connection: Connection) -> Bool {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(connection.handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let sync = file.pointee.pMethods?.pointee.xSync else { return false }
        return sync(file, SQLITE_SYNC_NORMAL) == SQLITE_OK
    }

    /// Background passes that synced the database file after copying (for tests).
    var databaseSyncs: Int { state.withLock { $0.databaseSyncs } }

    /// Whether the last background pass copied the whole WAL it saw (for tests).
    var copiedAllItSaw: Bool { state.withLock { $0.copiedUpTo != nil } }

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
