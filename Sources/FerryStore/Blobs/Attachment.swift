/// One entry of a revision's `_attachments`: a named blob with its metadata, as CouchDB and
/// Couchbase write it (`{"digest": "sha1-…", "length": 5, "content_type": "text/plain",
/// "revpos": 2, "stub": true}`).
///
/// `isFetched` says whether the blob's bytes are in this database. A replicated revision may
/// reference blobs a download policy skipped: their metadata is kept and visible, and they
/// become fetched as soon as the blob is written (`Database.writeBlob`), with no change to the
/// document.
public struct Attachment: Sendable, Equatable {
    /// The attachment's name (its key in `_attachments`).
    public let name: String
    /// The content address of its bytes.
    public let digest: BlobDigest
    /// Its size in bytes.
    public let length: Int64
    /// The MIME type, if the document gives one.
    public let contentType: String?
    /// The generation of the revision that added or last changed it.
    public let revpos: Int?
    /// Whether the blob is stored here (readable with `Database.readBlob`).
    public let isFetched: Bool

    /// Attachment metadata without presence (what a body says), parsed and checked.
    struct Entry: Equatable {
        var digest: BlobDigest
        var length: Int64
        var contentType: String?
        var revpos: Int?
    }

    /// Parses and checks a body's `_attachments` (nil if it has none). Every rule that makes
    /// an entry usable: an object of objects, a `sha1-` digest, a non-negative integer length,
    /// a string content type, a non-negative integer revpos (kept as given: CouchDB stores a
    /// replicated revision's revpos even past its generation), a boolean stub, and no inline
    /// `data` (write the blob, then reference it).
    static func entries(in properties: [String: JSONValue]) throws(StoreError) -> [String: Entry]? {
        guard let value = properties["_attachments"] else { return nil }
        guard case .object(let members) = value else {
            throw .invalidAttachment(name: "", reason: "_attachments must be an object")
        }
        var out: [String: Entry] = [:]
        // Name order, so the first error reported does not depend on hashing.
        for (name, meta) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            guard !name.isEmpty else { throw .invalidAttachment(name: name, reason: "empty name") }
            guard case .object(let m) = meta else { throw .invalidAttachment(name: name, reason: "metadata must be an object") }
            guard let text = m["digest"]?.stringValue else { throw .invalidAttachment(name: name, reason: "missing digest") }
            guard let digest = try? BlobDigest(text) else {
                throw .invalidAttachment(name: name, reason: "digest \(text.debugDescription) is not sha1-<base64>")
            }
            guard case .int(let length)? = m["length"], length >= 0 else {
                throw .invalidAttachment(name: name, reason: "length must be a non-negative integer")
            }
            var contentType: String?
            if let ct = m["content_type"] {
                guard case .string(let s) = ct else { throw .invalidAttachment(name: name, reason: "content_type must be a string") }
                contentType = s
            }
            var revpos: Int?
            if let rp = m["revpos"] {
                guard case .int(let r) = rp, r >= 0 else {
                    throw .invalidAttachment(name: name, reason: "revpos must be a non-negative integer")
                }
                revpos = Int(r)
            }
            if let stub = m["stub"], stub.boolValue == nil {
                throw .invalidAttachment(name: name, reason: "stub must be a boolean")
            }
            if m["data"] != nil || m["follows"] != nil {
                throw .invalidAttachment(name: name, reason: "inline or following data is not stored in documents; write the blob first")
            }
            out[name] = Entry(digest: digest, length: length, contentType: contentType, revpos: revpos)
        }
        return out
    }
}
