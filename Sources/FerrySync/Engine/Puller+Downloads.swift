import FerryStore

/// Draining the attachment queue of a pull with a download policy (`AttachmentDownloadQueue`):
/// only while the pull is caught up, so revisions come before attachments, and one attachment
/// at a time over the pull's own connection, so the priority order is the order they arrive.
extension Puller {
    /// One-shot, once the pull is done: downloads everything queued, highest priority first.
    /// Throws for a failure that may pass (the item is queued again); a download that fails
    /// otherwise is reported as a document failure and the rest go on.
    func downloadQueued() async throws(ReplicationError) {
        guard let downloads else { return }
        reporter.downloading(true)
        defer { reporter.downloading(false) }
        while !Task.isCancelled, let item = downloads.pop() {
            try await download(item, queue: downloads)
        }
    }

    /// Continuous: whenever attachments are queued and the pull is idle, downloads them, one
    /// at a time, waiting between two for the pull to be idle again (revisions that arrived
    /// meanwhile are stored first). Returns when the session ends; throws like
    /// `downloadQueued()`.
    func downloadQueuedWhenIdle() async throws(ReplicationError) {
        guard let downloads else { return }
        defer { reporter.downloading(false) }
        while true {
            await downloads.waitForItems()
            guard !Task.isCancelled, await waitUntilIdle() else { return }
            guard let item = downloads.pop() else { continue }
            reporter.downloading(true)
            try await download(item, queue: downloads)
            if downloads.count == 0 { reporter.downloading(false) }
        }
    }

    private func download(_ item: AttachmentDownload, queue: AttachmentDownloadQueue) async throws(ReplicationError) {
        // Another document with the same blob, or an on-demand fetch, may have brought it.
        guard !database.hasBlob(digest: item.digest) else { return queue.onEvent(item.event(.fetched)) }
        do throws(ReplicationError) {
            try await AttachmentTransfer.fetch(item.digest, length: item.length, documentID: item.documentID,
                                               connection: connection, database: database)
        } catch {
            if error.isTransient {
                queue.enqueue([item])
                throw error
            }
            logger.warning("could not download an attachment", metadata: ["doc": "\(item.documentID)", "attachment": "\(item.name)",
                                                                          "error": "\(error)"])
            reporter.event(DocumentEvent(direction: .pull, documentID: item.documentID, revisionID: item.revisionID,
                                         isDeleted: false, kind: .failed(error)))
            queue.onEvent(item.event(.failed(error)))
            return
        }
        queue.onEvent(item.event(.fetched))
    }
}

extension AttachmentDownload {
    /// The public event for this download.
    func event(_ kind: AttachmentEvent.Kind) -> AttachmentEvent {
        AttachmentEvent(documentID: documentID, revisionID: revisionID, name: name, digest: digest, length: length,
                        priority: priority, kind: kind)
    }
}
