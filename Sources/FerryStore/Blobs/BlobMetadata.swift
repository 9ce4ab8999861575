/// What storing a blob produced: its content address and size. Put it in a document with
/// `Document.setAttachment(_:blob:contentType:)`.
public struct BlobMetadata: Hashable, Sendable {
    /// The SHA-1 content address.
    public let digest: BlobDigest
    /// The blob's size in bytes.
    public let length: Int64

    /// Metadata for a blob of `length` bytes with `digest`.
    public init(digest: BlobDigest, length: Int64) {
        self.digest = digest
        self.length = length
    }
}
