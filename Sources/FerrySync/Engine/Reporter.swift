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
    /// Whether anyone would see a document event now; without a listener, events are counted
    /// and not built.
    let wantsEvents: @Sendable () -> Bool
    /// Called with the number of `rev` messages each time some are sent (statistics).
    let onRevisionsSent: @Sendable (Int) -> Void
    let onChange: @Sendable (ReplicationProgress, Bool) -> Void

    init(onEvent: @escaping @Sendable (DocumentEvent) -> Void = { _ in },
         wantsEvents: @escaping @Sendable () -> Bool = { true },
         onChange: @escaping @Sendable (ReplicationProgress, Bool) -> Void = { _, _ in },
         onRevisionsSent: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.onEvent = onEvent
        self.wantsEvents = wantsEvents
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

    /// How many events of `kind` there were.
    func count(of kind: DocumentEvent.Kind) -> Int {
        state.withLock { $0.counts[Self.index(of: kind)] }
    }

    func event(_ e: DocumentEvent) {
        state.withLock { $0.counts[Self.index(of: e.kind)] += 1 }
        onEvent(e)
    }

    /// Counts `n` events of `kind` and reports the events `make` builds (given 0..<n) only if
    /// someone listens: in a bulk transfer nobody usually does, and building each event (its
    /// revision ID as text) and fanning it out cost more than the count.
    func events(_ kind: DocumentEvent.Kind, count n: Int, _ make: (Int) -> DocumentEvent) {
        guard n > 0 else { return }
        state.withLock { $0.counts[Self.index(of: kind)] += n }
        guard wantsEvents() else { return }
        for i in 0..<n { onEvent(make(i)) }
    }

    private static func index(of kind: DocumentEvent.Kind) -> Int {
        switch kind {
        case .pushed: 0
        case .pulled: 1
        case .conflictResolved: 2
        case .failed: 3
        }
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
