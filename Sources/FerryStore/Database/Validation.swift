/// A revision about to be stored, as a validation function sees it.
public struct ProposedRevision: Sendable {
    /// Where the revision comes from.
    public enum Source: Sendable, Equatable {
        /// A save or delete through this database's API.
        case local
        /// A revision inserted by replication.
        case replicated
    }

    /// The document ID.
    public let documentID: String
    /// The new revision's ID.
    public let revisionID: RevisionID
    /// The new body (for a tombstone: `{}` or the fields the deletion keeps).
    public let properties: [String: JSONValue]
    /// Whether the new revision is a deletion.
    public let isDeletion: Bool
    /// Local save or replicated insert.
    public let source: Source
}

/// What a validation function can see besides the new revision (docs/store.md §7).
public struct ValidationContext: Sendable {
    /// The document's current revision before this change; nil if none or deleted.
    public let currentRevision: Document?
    /// Top-level keys added, removed or changed relative to the current revision, sorted.
    public let changedKeys: [String]
}

/// A validation function's verdict.
public enum ValidationResult: Sendable, Equatable {
    /// Store it.
    case accept
    /// Refuse it; the save throws `StoreError.rejected(status:message:)`. `status` is 403
    /// (Forbidden) by default, 401 (Unauthorized) when authentication is the reason.
    case reject(message: String, status: Int = 403)
}

/// A validation function: pure, fast, and not calling back into the database (it runs on the
/// writer, inside the transaction).
public typealias Validator = @Sendable (ProposedRevision, ValidationContext) -> ValidationResult
