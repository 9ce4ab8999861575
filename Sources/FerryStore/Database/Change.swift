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
    /// Whether the document has leaves besides the current revision (another life's
    /// tombstone, a conflict's closed loser, a conflict not resolved yet): a replicator sends
    /// those too, or a peer that holds an older state of them never learns how they ended.
    public internal(set) var hasOtherLeaves = false

    /// An entry for `revisionID` of `documentID` at `sequence` (a leaf other than the current
    /// one is listed with its document's sequence).
    public init(documentID: String, revisionID: RevisionID, isDeleted: Bool, sequence: Int64, hasOtherLeaves: Bool = false) {
        self.documentID = documentID
        self.revisionID = revisionID
        self.isDeleted = isDeleted
        self.sequence = sequence
        self.hasOtherLeaves = hasOtherLeaves
    }
}
