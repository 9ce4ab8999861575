import FerryStore
import Logging

/// Pushes to a CouchDB database as CouchDB's replicator does (Protocol/replication-http.md,
/// "Push"): local changes in batches from the checkpoint, every leaf of each changed document
/// offered with `_revs_diff`, the missing revisions sent with their histories by
/// `_bulk_docs` (`new_edits: false`; attachments the target's `possible_ancestors` already
/// have go as stubs), then the checkpoint. A batch the server refuses as too large (413) is
/// split in halves; a document refused alone (401, 403, 413, validation) is reported and the
/// push goes on. Continuous: once caught up, waits for the next local change.
struct CouchPusher: Sendable {
    let remote: CouchRemote
    let database: Database
    let configuration: ReplicatorConfiguration
    let checkpoint: CouchCheckpoint
    let reporter: Reporter
    let logger: Logger

    /// Runs from the checkpoint until caught up (one-shot) or until cancelled (continuous).
    func run(reset: Bool) async throws(ReplicationError) {
        let start = try await checkpoint.start(reset: reset)
        var since = start.intValue ?? Int64(CouchPuller.sequenceText(start)) ?? 0
        var stats = ["docs_read": 0, "docs_written": 0, "doc_write_failures": 0, "missing_checked": 0, "missing_found": 0]
        // The next batch is read and offered (`_revs_diff`) while this one is written.
        var next = prepare(after: since)
        while !Task.isCancelled {
            let current = next
            let batch = try await withTaskCancellationHandler { await current.value } onCancel: { current.cancel() }.get()
            guard let last = batch.last else {
                try await checkpoint.flush()
                reporter.caughtUp(.push)
                guard configuration.continuous else { return }
                _ = await database.waitForChange(after: since)
                next = prepare(after: since)
                continue
            }
            next = prepare(after: last)
            reporter.found(batch.changed, direction: .push)
            stats["missing_checked", default: 0] += batch.offered
            stats["missing_found", default: 0] += batch.docs.count
            stats["docs_read", default: 0] += batch.docs.count
            let failed: Int
            do { failed = try await send(batch.docs) } catch {
                next.cancel()
                throw error
            }
            stats["docs_written", default: 0] += batch.docs.count - failed
            stats["doc_write_failures", default: 0] += failed
            reporter.completed(batch.changed)
            since = last
            try await checkpoint.save(seq: .int(since), stats: stats)
        }
        next.cancel()
        throw .stopped
    }

    /// One batch of local changes, read and offered: what the target lacks, as documents.
    struct Batch: Sendable {
        /// The last local sequence the batch covers; nil when there was no change.
        var last: Int64?
        /// Changes that passed the filters.
        var changed = 0
        /// Revisions offered with `_revs_diff`.
        var offered = 0
        /// The missing revisions, as `_bulk_docs` (or a `multipart/related` PUT) takes them.
        var docs: [CouchDocument.Outgoing] = []
    }

    /// Starts reading and offering the batch after `since`.
    private func prepare(after since: Int64) -> Task<Result<Batch, ReplicationError>, Never> {
        Task {
            do throws(ReplicationError) { return .success(try await batch(after: since)) } catch { return .failure(error) }
        }
    }

    private func batch(after since: Int64) async throws(ReplicationError) -> Batch {
        let read: (changes: [Change], trees: [String: RevisionTree])
        do { read = try database.changesWithTrees(since: since, limit: configuration.batchSize) } catch { throw .store(error) }
        var out = Batch(last: read.changes.last?.sequence)
        let ids = configuration.documentIDs.map(Set.init)
        let changes = read.changes.filter { ids?.contains($0.documentID) ?? true }.filter(accepts)
        out.changed = changes.count
        var offer: [String: JSONValue] = [:]
        for c in changes {
            guard let tree = read.trees[c.documentID] else { continue }
            offer[c.documentID] = .array(tree.leaves.map { .string($0.revisionID.description) })
        }
        out.offered = offer.values.reduce(0) { $0 + ($1.arrayValue?.count ?? 0) }
        guard !offer.isEmpty else { return out }
        let diff = try await remote.expect("POST", "_revs_diff", json: .object(offer))
        for (id, value) in diff.objectValue ?? [:] {
            guard let tree = read.trees[id], let o = value.objectValue else { continue }
            let ancestors = (o["possible_ancestors"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap { try? RevisionID($0) } }
            for text in (o["missing"]?.arrayValue ?? []).compactMap(\.stringValue) {
                guard let rev = try? RevisionID(text),
                      let doc = CouchDocument.json(id: id, revision: rev, tree: tree, database: database, targetHas: ancestors) else { continue }
                out.docs.append(doc)
            }
        }
        return out
    }

    /// Whether the push filter and the selector let a change through.
    private func accepts(_ change: Change) -> Bool {
        guard let accept = configuration.pushAcceptance else { return true }
        guard let doc = try? database.document(change.documentID, includeDeleted: true) else { return false }
        return accept(doc, change.isDeleted ? .deleted : [])
    }

    /// Sends `docs`: each with a large attachment alone as `multipart/related`
    /// (`PUT /db/doc?new_edits=false`, the bytes raw), the others with `_bulk_docs`
    /// (`new_edits: false`) in requests of at most 8 MiB, one after another (a CouchDB database
    /// has one writer: concurrent requests only cut the batches smaller; measured slower).
    /// Returns how many the server refused (each reported).
    private func send(_ outgoing: [CouchDocument.Outgoing]) async throws(ReplicationError) -> Int {
        var failed = 0
        for o in outgoing where !o.parts.isEmpty { failed += try await putMultipart(o) }
        let docs = outgoing.filter(\.parts.isEmpty).map(\.doc)
        var chunk: [[String: JSONValue]] = []
        var size = 0
        for d in docs {
            let n = CanonicalJSON.encode(.object(d)).count
            if !chunk.isEmpty && size + n > 8 << 20 {
                failed += try await bulkDocs(chunk)
                chunk = []
                size = 0
            }
            chunk.append(d)
            size += n
        }
        if !chunk.isEmpty { failed += try await bulkDocs(chunk) }
        return failed
    }

    /// One document with its large attachments as parts; 1 when the server refused it.
    private func putMultipart(_ o: CouchDocument.Outgoing) async throws(ReplicationError) -> Int {
        let (contentType, body) = CouchDocument.multipart(o)
        let id = o.doc["_id"]?.stringValue ?? "?"
        // No `Expect: 100-continue`: CouchDB 3.5 does not answer it, so every such document
        // waited out the client's 1 s (measured: a push of 10,000 with 45 large attachments
        // took 51 s instead of 7), and CouchDB's own replicator does not send it either.
        let a = try await remote.request("PUT", CouchRemote.encodeDocumentID(id) + "?new_edits=false", body: body, contentType: contentType)
        if (200..<300).contains(a.status) {
            reporter.event(DocumentEvent(direction: .push, documentID: id, revisionID: o.doc["_rev"]?.stringValue,
                                         isDeleted: o.doc["_deleted"]?.boolValue ?? false, kind: .pushed))
            return 0
        }
        // The network and the server's own troubles end the session (retried); a refusal of
        // this document is reported and the push goes on.
        if a.status >= 500 || a.status == 408 || a.status == 429 { throw CouchRemote.failure(a, "PUT \(id)") }
        report(o.doc, .httpStatus(a.status, a.reason))
        return 1
    }

    private func bulkDocs(_ docs: [[String: JSONValue]]) async throws(ReplicationError) -> Int {
        let a = try await remote.request("POST", "_bulk_docs", json: .object(["docs": .array(docs.map { .object($0) }), "new_edits": false]))
        if a.status == 413 {
            guard docs.count > 1 else {
                report(docs[0], .httpStatus(413, a.reason))
                return 1
            }
            let half = docs.count / 2
            return try await bulkDocs(Array(docs[..<half])) + bulkDocs(Array(docs[half...]))
        }
        guard (200..<300).contains(a.status) else { throw CouchRemote.failure(a, "POST _bulk_docs") }
        // With `new_edits: false` CouchDB lists only the documents it refused.
        var refused: [String: String] = [:]
        for item in a.json.arrayValue ?? [] {
            guard let o = item.objectValue, let id = o["id"]?.stringValue, o["error"] != nil else { continue }
            refused[id] = (o["error"]?.stringValue ?? "") + ": " + (o["reason"]?.stringValue ?? "")
        }
        for d in docs {
            let id = d["_id"]?.stringValue ?? "?"
            if let why = refused[id] {
                report(d, .httpStatus(why.hasPrefix("forbidden") ? 403 : why.hasPrefix("unauthorized") ? 401 : 400, why))
            } else {
                reporter.event(DocumentEvent(direction: .push, documentID: id, revisionID: d["_rev"]?.stringValue,
                                             isDeleted: d["_deleted"]?.boolValue ?? false, kind: .pushed))
            }
        }
        return refused.count
    }

    private func report(_ doc: [String: JSONValue], _ error: ReplicationError) {
        reporter.event(DocumentEvent(direction: .push, documentID: doc["_id"]?.stringValue ?? "?", revisionID: doc["_rev"]?.stringValue,
                                     isDeleted: doc["_deleted"]?.boolValue ?? false, kind: .failed(error)))
    }
}
