/// A revision received from a peer, to be inserted with its history.
public struct ReplicatedRevision: Sendable {
    /// The document ID.
    public var documentID: String
    /// The revision and its ancestors, newest first, as received (`[rev, parent, ...]`).
    /// Each is parsed; generations must decrease by exactly one.
    public var history: [String]
    /// The body: a JSON object, stored as received after validation.
    public var body: [UInt8]
    /// Whether the revision is a tombstone.
    public var isDeleted: Bool

    /// A replicated revision.
    public init(documentID: String, history: [String], body: [UInt8], isDeleted: Bool = false) {
        self.documentID = documentID
        self.history = history
        self.body = body
        self.isDeleted = isDeleted
    }
}

/// What inserting one replicated revision did.
public struct InsertOutcome: Sendable, Equatable {
    /// Whether anything was added.
    public enum Status: Sendable, Equatable {
        /// The revision (and any missing ancestors) was added.
        case inserted
        /// The revision was already present; nothing changed.
        case noop
    }

    /// Inserted or already present.
    public var status: Status
    /// The document's current revision afterwards.
    public var current: RevisionID?
    /// Set when the new revision conflicted with the previous current revision (that one).
    public var conflictedWith: RevisionID?
    /// Whether the conflict was resolved in the same transaction.
    public var resolved: Bool
    /// The sequence assigned to the change (nil for a noop).
    public var sequence: Int64?

    /// An outcome with these fields.
    public init(status: Status, current: RevisionID?, conflictedWith: RevisionID? = nil, resolved: Bool = false,
                sequence: Int64? = nil) {
        self.status = status
        self.current = current
        self.conflictedWith = conflictedWith
        self.resolved = resolved
        self.sequence = sequence
    }
}
