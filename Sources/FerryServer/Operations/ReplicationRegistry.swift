import FerrySync
import FoundationEssentials
import Synchronization

/// The replications a daemon runs on its own (its managed replications, `--replicate` ones
/// included), as `/_up` and `/_metrics` report them. A link is one replication of one database;
/// it outlives the `Replicator`s that serve it (the scheduler starts a new one for each run and
/// after a fatal error), so its counters add up over runs, as an operator's dashboard expects of
/// a counter.
public final class ReplicationRegistry: Sendable {
    private let links = Mutex<[ReplicationLink]>([])

    /// An empty registry.
    public init() {}

    /// Adds a link for `target` (already stripped of credentials) and database `database`.
    public func link(target: String, database: String) -> ReplicationLink {
        let l = ReplicationLink(target: target, database: database)
        links.withLock { $0.append(l) }
        return l
    }

    /// Removes a link (its replication is no longer configured).
    public func remove(_ link: ReplicationLink) {
        links.withLock { $0.removeAll { $0 === link } }
    }

    /// Every link's state and counters now, in the order they were added.
    public var snapshots: [ReplicationLink.Snapshot] { links.withLock { $0 }.map(\.snapshot) }
}

/// One configured replication: the peer, the local database, and what its replicators did.
public final class ReplicationLink: Sendable {
    /// State and counters at one moment.
    public struct Snapshot: Sendable, Equatable {
        /// The peer's URL, without credentials.
        public var target: String
        /// The local database's name.
        public var database: String
        /// The current replicator's activity; `stopped` between a fatal error and the restart.
        public var state: ActivityLevel
        /// Revisions the peer stored from us.
        public var documentsPushed: Int
        /// Revisions we stored from the peer.
        public var documentsPulled: Int
        /// Pulled conflicts resolved here.
        public var conflicts: Int
        /// Documents that failed, plus connection failures and stops on an error.
        public var errors: Int
        /// When the last error happened (seconds since 1970); nil if none yet.
        public var lastErrorTime: Double?
        /// The last error, for people.
        public var lastError: String?
    }

    private struct State {
        var state = ActivityLevel.stopped
        var pushed = 0
        var pulled = 0
        var conflicts = 0
        var errors = 0
        var lastErrorTime: Double?
        var lastError: String?
        /// The last replication error counted, so that one outage reported by several status
        /// changes (offline, connecting, offline ...) with the same error is not counted at each.
        var countedError: ReplicationError?
    }

    /// The peer's URL, without credentials.
    public let target: String
    /// The local database's name.
    public let database: String
    private let state = Mutex(State())

    init(target: String, database: String) {
        self.target = target
        self.database = database
    }

    /// Follows `replicator` (call before `start()`): its status and document events from now on.
    public func attach(_ replicator: Replicator) {
        replicator.addStatusListener { [weak self] s in self?.statusChanged(s) }
        replicator.addDocumentListener { [weak self] e in self?.event(e) }
    }

    private func statusChanged(_ s: ReplicatorStatus) {
        state.withLock { st in
            st.state = s.activity
            if let e = s.lastError {
                if st.countedError != e {
                    st.countedError = e
                    st.errors += 1
                    st.lastErrorTime = Date().timeIntervalSince1970
                    st.lastError = "\(e)"
                }
            } else if s.activity == .idle || s.activity == .busy {
                st.countedError = nil
            }
        }
    }

    private func event(_ e: DocumentEvent) {
        state.withLock { st in
            switch e.kind {
            case .pushed: st.pushed += 1
            case .pulled: st.pulled += 1
            case .conflictResolved: st.conflicts += 1
            case .failed(let error):
                st.errors += 1
                st.lastErrorTime = Date().timeIntervalSince1970
                st.lastError = "\(e.documentID): \(error)"
            }
        }
    }

    /// State and counters now.
    public var snapshot: Snapshot {
        state.withLock { st in
            Snapshot(target: target, database: database, state: st.state, documentsPushed: st.pushed, documentsPulled: st.pulled,
                     conflicts: st.conflicts, errors: st.errors, lastErrorTime: st.lastErrorTime, lastError: st.lastError)
        }
    }
}
