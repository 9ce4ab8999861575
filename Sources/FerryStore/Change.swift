/// One entry of the change feed: a document whose revision tree changed, at `sequence`.
public struct Change: Sendable, Equatable {
    /// The document ID.
    public let documentID: String
    /// Its current revision after the change.
    public let revisionID: RevisionID
    /// Whether the current revision is a tombstone.
    public let isDeleted: Bool
    /// The change's sequence: strictly increasing across the database, never reused.
    public let sequence: Int64
}
