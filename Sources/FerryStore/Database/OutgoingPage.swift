/// A page of the change feed read for an active push, in one snapshot (`Database.outgoingPage`):
/// each change with what its `rev` needs and the latest revision the remote is known to have of
/// its document — its remote parent in `proposeChanges` — without building its tree.
public struct OutgoingPage: Sendable {
    /// One change of the page.
    public struct Entry: Sendable {
        /// The change, as `Database.changes(since:limit:)` lists it.
        public let change: Change
        /// What sending the change's revision needs (nil: no longer kept).
        public let revision: OutgoingRevision?
        /// The latest revision of the document the remote is known to have, if any.
        public let remoteRevision: RevisionID?
    }

    /// The page's changes in sequence order.
    public let entries: [Entry]
    /// The whole trees (acknowledged revisions applied) of the page's documents that have
    /// leaves besides their current revision (`Change.hasOtherLeaves`): their other leaves are
    /// sent too, and rarely.
    public let otherLeafTrees: [String: RevisionTree]
    /// `Database.purgeCount()` as of the snapshot the page was read in: what
    /// `setRemoteRevisions(_:remote:purgeCountBefore:)` compares with.
    public let purgeCount: Int64
}
