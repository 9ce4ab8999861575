/// What a download policy decides for one attachment of a pulled revision.
public enum AttachmentDownloadDecision: Sendable, Equatable {
    /// Leave it unfetched: the revision keeps its metadata (`Attachment.isFetched == false`)
    /// and `Replicator.fetchAttachments` can get it later.
    case skip
    /// Download it after its revision is stored; higher priorities go first, equal ones in the
    /// order their revisions arrived.
    case fetch(priority: Int)
}
