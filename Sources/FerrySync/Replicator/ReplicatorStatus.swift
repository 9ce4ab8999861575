/// What a replicator is doing (Couchbase Lite's activity levels).
public enum ActivityLevel: String, Sendable, Equatable {
    /// Not running: never started, finished, stopped, or gave up (see `lastError`).
    case stopped
    /// Waiting to retry after a transient failure.
    case offline
    /// Opening the connection.
    case connecting
    /// Connected and caught up (continuous replications wait here for changes).
    case idle
    /// Transferring.
    case busy
}

/// Progress as Couchbase Lite reports it: changes handled and changes known so far. `total`
/// grows as more changes are discovered; `completed == total` when caught up.
public struct ReplicationProgress: Sendable, Equatable {
    /// Changes handled (pushed, pulled, skipped or failed).
    public var completed: Int = 0
    /// Changes known to need handling.
    public var total: Int = 0
}

/// A snapshot of a replicator's state.
public struct ReplicatorStatus: Sendable, Equatable {
    /// The activity level.
    public var activity: ActivityLevel
    /// Progress.
    public var progress: ReplicationProgress
    /// The last error that stopped or interrupted replication (nil when all is well).
    public var lastError: ReplicationError?
}

/// Direction of a document event.
public enum ReplicationDirection: String, Sendable {
    case push, pull
}

/// Something that happened to one document.
public struct DocumentEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// The revision was stored by the peer.
        case pushed
        /// The revision was stored here.
        case pulled
        /// A pulled conflict was resolved here (the result is pushed back).
        case conflictResolved
        /// The document failed (rejected by validation, conflict, bad data …); replication goes on.
        case failed(ReplicationError)
    }
    /// Push or pull.
    public let direction: ReplicationDirection
    /// The document.
    public let documentID: String
    /// The revision concerned, if known.
    public let revisionID: String?
    /// Whether that revision is a tombstone.
    public let isDeleted: Bool
    /// What happened.
    public let kind: Kind
}
