import FerryStore

/// What a download policy is asked about one attachment of a pulled revision: the attachment's
/// metadata and the revision it belongs to, so a decision can depend on the document too.
public struct AttachmentInfo: Sendable, Equatable {
    /// The document it belongs to.
    public let documentID: String
    /// The pulled revision that references it.
    public let revisionID: String
    /// That revision's body (`_attachments` included), for decisions per document.
    public let properties: [String: JSONValue]
    /// Its name in `_attachments`.
    public let name: String
    /// Its content address.
    public let digest: BlobDigest
    /// Its size in bytes.
    public let length: Int64
    /// Its MIME type, if given.
    public let contentType: String?

    /// Describes one attachment (policies are plain functions of this, so tests can build one).
    public init(documentID: String, revisionID: String = "", properties: [String: JSONValue] = [:], name: String,
                digest: BlobDigest, length: Int64, contentType: String?) {
        self.documentID = documentID
        self.revisionID = revisionID
        self.properties = properties
        self.name = name
        self.digest = digest
        self.length = length
        self.contentType = contentType
    }
}
