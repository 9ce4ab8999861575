import FerryBLIP
import FerryStore

/// The first steps of taking a `rev`, the same for both roles: read it (malformed ⇒ `HTTP`/400),
/// fetch the attachments it needs that are not here (Protocol/replication.md, "Attachments": off the event loop, before
/// the revision is stored), then hand it to `store`. A failed download is answered with its
/// status and reported to `failed`; nothing is stored for it. Returns false for a malformed
/// `rev` (answered here; neither `failed` nor `store` is called for it).
///
/// With a download policy nothing is downloaded here: `store` gets the revision at once, with
/// the attachments the policy wants, to be queued (Protocol/download-rules.md, "How a pull applies them").
enum RevReceiver {
    @discardableResult
    static func receive(_ request: BLIPIncomingRequest, database: Database, downloads: AttachmentDownloadQueue?,
                        failed: @escaping @Sendable (ReplicatedRevision, ReplicationError) -> Void,
                        store: @escaping @Sendable (ReplicatedRevision, BLIPIncomingRequest, [AttachmentDownload]) -> Void) -> Bool {
        let revision: ReplicatedRevision
        do { revision = try RevMessage.read(request.message) } catch {
            request.respondHTTPError(400, "\(error)")
            return false
        }
        guard AttachmentTransfer.containsAttachments(revision.body) else {
            store(revision, request, [])
            return true
        }
        // Numbered here, on the event loop, where revisions are taken in the order they came.
        let arrival = downloads?.nextArrival() ?? 0
        Task {
            do throws(ReplicationError) {
                if let downloads {
                    store(revision, request, try AttachmentTransfer.wanted(by: downloads.policy, in: revision, arrival: arrival,
                                                                          database: database))
                    return
                }
                try await AttachmentTransfer.fetchMissing(for: revision, connection: request.connection, database: database)
                store(revision, request, [])
            } catch {
                // Reported before it is answered: the answer frees the sender's slot, and the
                // revision must no longer count as pending by then.
                failed(revision, error)
                if case .store(let e) = error { request.respondHTTPError(e.wireStatus, e.wireMessage) }
                else { request.respondHTTPError(502, "\(error)") }
            }
        }
        return true
    }
}
