/// A conflict between two leaves of a document's revision tree, as handed to a resolver.
/// `local` and `remote` are nil when that leaf is a tombstone (Protocol/revisions.md, "Resolver input").
public struct Conflict: Sendable, Equatable {
    /// The document in conflict.
    public let documentID: String
    /// The local side (the current revision, or the one named), nil if deleted.
    public let local: Document?
    /// The remote side (the conflicting leaf), nil if deleted.
    public let remote: Document?
    /// The local leaf's revision ID (present even when `local` is nil).
    public let localRevisionID: RevisionID
    /// The remote leaf's revision ID (present even when `remote` is nil).
    public let remoteRevisionID: RevisionID

    /// A conflict between two leaves (nil documents for tombstones).
    public init(documentID: String, local: Document?, remote: Document?, localRevisionID: RevisionID, remoteRevisionID: RevisionID) {
        self.documentID = documentID
        self.local = local
        self.remote = remote
        self.localRevisionID = localRevisionID
        self.remoteRevisionID = remoteRevisionID
    }
}
