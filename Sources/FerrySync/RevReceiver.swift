import FerryBLIP
import FerryStore

/// The first steps of taking a `rev`, the same for both roles: read it (malformed ⇒ `HTTP`/400),
/// fetch the attachments it needs that are not here (reference §3.9: off the event loop, before
/// the revision is stored), then hand it to `store`. A failed download is answered with its
/// status and reported to `failed`; nothing is stored for it.
enum RevReceiver {
    static func receive(_ request: BLIPIncomingRequest, database: Database, policy: AttachmentDownloadPolicy?,
                        failed: @escaping @Sendable (ReplicatedRevision, ReplicationError) -> Void,
                        store: @escaping @Sendable (ReplicatedRevision, BLIPIncomingRequest) -> Void) {
        let revision: ReplicatedRevision
        do { revision = try RevMessage.read(request.message) } catch {
            request.respondHTTPError(400, "\(error)")
            return
        }
        guard AttachmentTransfer.containsAttachments(revision.body) else { return store(revision, request) }
        Task {
            do throws(ReplicationError) {
                try await AttachmentTransfer.fetchMissing(for: revision, connection: request.connection, database: database, policy: policy)
                store(revision, request)
            } catch {
                if case .store(let e) = error { request.respondHTTPError(e.wireStatus, e.wireMessage) }
                else { request.respondHTTPError(502, "\(error)") }
                failed(revision, error)
            }
        }
    }
}
