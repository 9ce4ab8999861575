import Synchronization

/// Where the workers of one replication report: document events, progress, and whether each
/// direction is caught up. The `Replicator` turns these into its status and event streams;
/// a passive peer's reporter only counts.
final class Reporter: Sendable {
    private struct State {
        var progress = ReplicationProgress()
        var caughtUp: [ReplicationDirection: Bool] = [:]
        // One counter per event kind, indexed by `index(of:)`: counting runs once per document,
        // and a String-keyed dictionary hashed the kind's name each time.
        var counts = [0, 0, 0, 0]
        /// Queued attachments are downloading (a pull with a download policy): not idle.
        var downloading = false
        var idle: Bool { !downloading && caughtUp.values.allSatisfy { $0 } && progress.completed >= progress.total }
    }
    private static let kindNames = ["pushed", "pulled", "conflictResolved", "failed"]
    private let state = Mutex(State())
    let onEvent: @Sendable (DocumentEvent) -> Void
    /// Called with the number of `rev` messages each time some are sent (statistics).
    let onRevisionsSent: @Sendable (Int) -> Void
    let onChange: @Sendable (ReplicationProgress, Bool) -> Void

    init(onEvent: @escaping @Sendable (DocumentEvent) -> Void = { _ in },
         onChange: @escaping @Sendable (ReplicationProgress, Bool) -> Void = { _, _ in },
         onRevisionsSent: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.onEvent = onEvent
        self.onChange = onChange
        self.onRevisionsSent = onRevisionsSent
    }

    var progress: ReplicationProgress { state.withLock { $0.progress } }

    /// How many events of each kind (`pushed`, `pulled`, `conflictResolved`, `failed`) there
    /// were; kinds that never happened are absent.
    var counts: [String: Int] {
        let c = state.withLock { $0.counts }
        var out: [String: Int] = [:]
        for (i, n) in c.enumerated() where n > 0 { out[Self.kindNames[i]] = n }
        return out
    }

    func event(_ e: DocumentEvent) {
        let i: Int
        switch e.kind {
        case .pushed: i = 0
        case .pulled: i = 1
        case .conflictResolved: i = 2
        case .failed: i = 3
        }
        state.withLock { $0.counts[i] += 1 }
        onEvent(e)
    }

    func found(_ n: Int, direction: ReplicationDirection) {
        guard n > 0 else { return }
        update { $0.progress.total += n; $0.caughtUp[direction] = false }
    }

    func completed(_ n: Int) {
        guard n > 0 else { return }
        update { $0.progress.completed += n }
    }

    func caughtUp(_ direction: ReplicationDirection, _ value: Bool = true) {
        update { $0.caughtUp[direction] = value }
    }

    /// Queued attachments started or stopped downloading; while they do, the replication is busy.
    func downloading(_ active: Bool) {
        update { $0.downloading = active }
    }

    /// Whether every direction that reported is caught up and no attachment is downloading.
    var isIdle: Bool { state.withLock { $0.idle } }

    private func update(_ body: (inout State) -> Void) {
        let (p, idle) = state.withLock { s -> (ReplicationProgress, Bool) in
            body(&s)
            return (s.progress, s.idle)
        }
        onChange(p, idle)
    }
}
