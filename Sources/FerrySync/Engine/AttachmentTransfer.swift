#if canImport(Glibc)
import Glibc
#endif
import FerryBLIP
import FerryStore

/// What a download policy is asked about one attachment of a pulled revision.
public struct AttachmentInfo: Sendable, Equatable {
    /// The document it belongs to.
    public let documentID: String
    /// Its name in `_attachments`.
    public let name: String
    /// Its content address.
    public let digest: BlobDigest
    /// Its size in bytes.
    public let length: Int64
    /// Its MIME type, if given.
    public let contentType: String?
}

/// Decides per attachment whether a pull downloads it now; a skipped one keeps its metadata
/// (`Attachment.isFetched == false`) and can be fetched later with `Replicator.fetchAttachments`.
public typealias AttachmentDownloadPolicy = @Sendable (AttachmentInfo) -> Bool

/// Attachments on the wire (Protocol/replication.md, "Attachments"): the receiver of a `rev` asks the sender for every
/// blob it lacks with `getAttachment` (`digest`, `docID`), checks length and SHA-1, stores it,
/// and only then stores the revision — so a stored revision's attachments are present unless a
/// download policy skipped them.
enum AttachmentTransfer {
    /// The attachments a received body references, or [] (cheap for bodies without any).
    static func attachments(in body: [UInt8], documentID: String, database: Database) throws(StoreError) -> [Attachment] {
        guard containsAttachments(body) else { return [] }
        let doc = try Document(id: documentID, json: body)
        return try database.attachments(of: doc)
    }

    private static let key = Array(#""_attachments""#.utf8)

    /// Whether `"_attachments"` occurs anywhere in the body: a cheap test that lets nearly every
    /// body skip the parse. It looks for `_` with `memchr` (rare in JSON, where a byte loop
    /// stopped at every quote), then compares the key around it.
    static func containsAttachments(_ body: [UInt8]) -> Bool {
        let key = Self.key
        let n = key.count
        guard body.count >= n else { return false }
        return body.withUnsafeBytes { b in
            key.withUnsafeBytes { k in
                guard let base = b.baseAddress, let kb = k.baseAddress else { return false }
                // The underscore is the key's second byte: candidates start one before it.
                var p = base + 1
                let end = base + (b.count - n + 2)
                while p < end, let hit = memchr(p, 0x5F, end - p) {
                    if memcmp(UnsafeRawPointer(hit) - 1, kb, n) == 0 { return true }
                    p = UnsafeRawPointer(hit) + 1
                }
                return false
            }
        }
    }

    /// Before a received revision is stored: downloads the blobs it references that are not here
    /// and that `policy` wants (all when nil), over `connection`. Returns at once for a body
    /// without attachments.
    static func fetchMissing(for revision: ReplicatedRevision, connection: BLIPConnection, database: Database,
                             policy: AttachmentDownloadPolicy?) async throws(ReplicationError) {
        let atts: [Attachment]
        do throws(StoreError) { atts = try attachments(in: revision.body, documentID: revision.documentID, database: database) }
        catch { throw .store(error) }
        try await fetchMissing(atts, documentID: revision.documentID, connection: connection, database: database, policy: policy)
    }

    /// Downloads the missing blobs of a revision the policy wants, over `connection`.
    static func fetchMissing(_ attachments: [Attachment], documentID: String, connection: BLIPConnection,
                             database: Database, policy: AttachmentDownloadPolicy?) async throws(ReplicationError) {
        for a in attachments where !a.isFetched {
            let info = AttachmentInfo(documentID: documentID, name: a.name, digest: a.digest, length: a.length, contentType: a.contentType)
            if let policy, !policy(info) { continue }
            try await fetch(a.digest, length: a.length, documentID: documentID, connection: connection, database: database)
        }
    }

    /// Fetches one blob and stores it after checking its length and digest.
    static func fetch(_ digest: BlobDigest, length: Int64, documentID: String, connection: BLIPConnection,
                      database: Database) async throws(ReplicationError) {
        let reply: BLIPMessage
        do {
            reply = try await connection.send(.request(profile: ReplicationProtocol.Profile.getAttachment,
                                                       properties: [(ReplicationProtocol.Property.digest, digest.description), (ReplicationProtocol.Property.docID, documentID)]))
        } catch { throw ReplicationError(error) }
        guard Int64(reply.body.count) == length, BlobDigest(of: reply.body) == digest else {
            throw .protocolError("attachment \(digest) of \(documentID): the peer sent \(reply.body.count) bytes that do not match")
        }
        do { _ = try database.writeBlob(reply.body) } catch { throw .store(error) }
    }

    /// Answers `getAttachment` from the blob store (off the event loop): any blob this database
    /// has, as Couchbase Lite does; `HTTP`/404 otherwise.
    static func serve(_ request: BLIPIncomingRequest, database: Database) {
        Task {
            let p = request.message.properties
            guard let text = p[ReplicationProtocol.Property.digest], let digest = try? BlobDigest(text) else {
                return request.respondHTTPError(400, "getAttachment needs a sha1- digest")
            }
            do {
                let bytes = try database.readBlob(digest: digest).readAll()
                request.respond(body: bytes, compressed: p.bool(ReplicationProtocol.Property.compress))
            } catch {
                request.respondHTTPError(404, "no attachment \(text)")
            }
        }
    }
}
