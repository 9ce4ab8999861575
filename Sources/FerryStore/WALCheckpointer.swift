import CSQLite
import Dispatch
import Synchronization

/// Runs the WAL checkpoints of a database on a thread of its own, through a connection of its
/// own, instead of inside whichever commit crossed SQLite's auto-checkpoint threshold: that
/// commit (copying up to `threshold` pages — tens of MiB — into the database file) held the
/// writer and stalled a replication's pipeline while the other core idled.
///
/// Checkpoints are PASSIVE (they never wait for readers or the writer). If they fall behind —
/// the WAL reaches four times the threshold, e.g. on a loaded machine — the committing writer
/// runs a FULL checkpoint itself (after the background one in progress, if any), so the WAL
/// stays bounded: the writer is slowed rather than the file left to grow. Durability is unchanged: a checkpoint only copies
/// committed pages, with the same `synchronous` setting as the writer.
///
/// Safety of `@unchecked Sendable`: `connection` is used only on `queue`; everything else is
/// immutable or behind `state`.
final class WALCheckpointer: @unchecked Sendable {
    let path: String
    let threshold: Int32
    let synchronous: String
    private let queue = DispatchQueue(label: "ferry.store.checkpoint")
    private let state = Mutex<(scheduled: Bool, closed: Bool)>((false, false))
    private var connection: Connection?

    init(path: String, thresholdPages: Int, synchronous: String) {
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
                queue.sync {}
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_FULL, nil, nil)
            }
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
        _ = sqlite3_wal_checkpoint_v2(c.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
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
