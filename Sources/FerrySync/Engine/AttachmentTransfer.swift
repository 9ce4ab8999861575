#if canImport(Glibc)
import Glibc
#endif
import FerryBLIP
import FerryStore

/// Attachments on the wire (Protocol/replication.md, "Attachments"): the receiver of a `rev` asks the sender for every
/// blob it lacks with `getAttachment` (`digest`, `docID`), checks length and SHA-1, stores it,
/// and only then stores the revision — so a stored revision's attachments are present unless a
/// download policy skipped them. With a policy, the revision is stored first and the wanted
/// blobs are queued (`AttachmentDownloadQueue`, `Puller+Downloads`).
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

    /// Before a received revision is stored (no download policy): downloads the blobs it
    /// references that are not here, over `connection`. Returns at once for a body without
    /// attachments.
    static func fetchMissing(for revision: ReplicatedRevision, connection: BLIPConnection, database: Database) async throws(ReplicationError) {
        let atts: [Attachment]
        do throws(StoreError) { atts = try attachments(in: revision.body, documentID: revision.documentID, database: database) }
        catch { throw .store(error) }
        for a in atts where !a.isFetched {
            try await fetch(a.digest, length: a.length, documentID: revision.documentID, connection: connection, database: database)
        }
    }

    /// With a download policy: the blobs a received revision references that are not here and
    /// that the policy fetches, with their priorities, in name order; `arrival` orders them
    /// among equal priorities. Nothing is downloaded: the revision is stored first and these
    /// are queued.
    static func wanted(by policy: AttachmentDownloadPolicy, in revision: ReplicatedRevision, arrival: UInt64,
                       database: Database) throws(ReplicationError) -> [AttachmentDownload] {
        let doc: Document
        let atts: [Attachment]
        do throws(StoreError) {
            doc = try Document(id: revision.documentID, json: revision.body)
            atts = try database.attachments(of: doc)
        } catch { throw .store(error) }
        let revisionID = revision.history.first ?? ""
        var out: [AttachmentDownload] = []
        for a in atts where !a.isFetched {
            let info = AttachmentInfo(documentID: revision.documentID, revisionID: revisionID, properties: doc.properties,
                                      name: a.name, digest: a.digest, length: a.length, contentType: a.contentType)
            guard case .fetch(let priority) = policy.decision(for: info) else { continue }
            out.append(AttachmentDownload(documentID: revision.documentID, revisionID: revisionID, name: a.name,
                                          digest: a.digest, length: a.length, priority: priority, arrival: arrival))
        }
        return out
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
