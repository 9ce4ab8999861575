import FerryStore

/// An attachment a replicator downloaded apart from its revision — queued by a download policy,
/// or fetched on demand by `Replicator.fetchAttachments` — or failed to
/// (`Replicator.addAttachmentListener`). Attachments fetched before their revision is stored
/// (no policy) arrive with it and have no events of their own.
public struct AttachmentEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// The blob was downloaded, checked and stored — or, for a queued one, was already
        /// here (another document has it): the attachment is fetched. Every queued attachment
        /// gets one event, `fetched` or `failed`.
        case fetched
        /// It could not be downloaded (the peer lacks it, sent wrong bytes, the store failed);
        /// it stays unfetched. A failure that may pass (the connection broke) is not reported
        /// here: the download is queued again and retried.
        case failed(ReplicationError)
    }
    /// The document.
    public let documentID: String
    /// The revision that referenced it when it was queued or fetched.
    public let revisionID: String?
    /// Its name in `_attachments`.
    public let name: String
    /// Its content address.
    public let digest: BlobDigest
    /// Its size in bytes.
    public let length: Int64
    /// The priority it was queued with; nil when fetched on demand.
    public let priority: Int?
    /// What happened.
    public let kind: Kind
}
