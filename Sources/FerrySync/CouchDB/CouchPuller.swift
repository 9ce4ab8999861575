import FerryHTTP
import FerryStore
import Logging

/// Pulls from a CouchDB database as CouchDB's replicator does (Protocol/replication-http.md,
/// "Pull"): `_changes?style=all_docs` in batches from the checkpoint, the revisions missing
/// here, fetched with `_bulk_get?revs=true&latest=true` by several requests at once, their
/// attachments not held here each fetched on its own (`GET /db/doc/att?rev=`, bytes not base64,
/// so a large one never sits in a JSON body), inserted with
/// their histories in one transaction per batch, then the checkpoint. Continuous: once caught
/// up, follows `_changes?feed=continuous` with a heartbeat.
struct CouchPuller: Sendable {
    let remote: CouchRemote
    let database: Database
    let configuration: ReplicatorConfiguration
    let checkpoint: CouchCheckpoint
    let reporter: Reporter
    let logger: Logger

    /// Documents per `_bulk_get` request.
    static let fetchChunk = 100

    /// Runs from the checkpoint until caught up (one-shot) or until cancelled (continuous).
    func run(reset: Bool) async throws(ReplicationError) {
        var since = try await checkpoint.start(reset: reset)
        var stats = ["docs_read": 0, "docs_written": 0, "doc_write_failures": 0, "missing_checked": 0, "missing_found": 0]
        // The next page is read and fetched while this one is stored: a page's documents are
        // in no other page of the same pass, so what it lacks does not depend on this one.
        var next = prepare(since: since)
        while !Task.isCancelled {
            let current = next
            let page = try await withTaskCancellationHandler { await current.value } onCancel: { current.cancel() }.get()
            if page.rows == 0 {
                if page.lastSeq != since, let lastSeq = page.lastSeq {
                    // A filtered feed moves on without rows.
                    since = lastSeq
                    try await checkpoint.save(seq: since, stats: stats)
                }
                try await checkpoint.flush()
                reporter.caughtUp(.pull)
                guard configuration.continuous else { return }
                // Caught up: one continuous feed from here on, until stopped. If it ends or
                // breaks, the replicator starts a new session from the checkpoint.
                try await follow(since: since, stats: &stats)
                throw .connection("the continuous _changes feed ended")
            }
            guard let lastSeq = page.lastSeq else { throw .protocolError("_changes answered without last_seq") }
            next = prepare(since: lastSeq)
            await store(page, stats: &stats)
            since = lastSeq
            do { try await checkpoint.save(seq: since, stats: stats) } catch {
                next.cancel()
                throw error
            }
        }
        next.cancel()
        throw .stopped
    }

    /// One page of the feed, read and fetched.
    struct Page: Sendable {
        var rows = 0
        var lastSeq: JSONValue?
        /// Revisions listed, and of those missing here.
        var checked = 0
        var missing = 0
        /// The fetched documents, and how many could not be fetched.
        var docs: [[String: JSONValue]] = []
        var failures = 0
    }

    /// Starts reading the page of `_changes` after `since` and fetching what it lacks here.
    private func prepare(since: JSONValue) -> Task<Result<Page, ReplicationError>, Never> {
        Task {
            do throws(ReplicationError) {
                let (rows, lastSeq) = try await changes(since: since)
                return .success(try await fetchPage(rows, lastSeq: lastSeq))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Heartbeat of the continuous feed, and the silence after which it counts as dead.
    static let heartbeat = 10.0

    /// Follows `_changes?feed=continuous&heartbeat=…` (RP "Listen to Changes Feed"): each
    /// read's complete lines are one batch — fetched, stored and checkpointed before the next
    /// read is looked at (the feed waits in the connection's buffer meanwhile). Returns when
    /// the server ends the feed; a missed heartbeat is a timeout.
    private func follow(since start: JSONValue, stats: inout [String: Int]) async throws(ReplicationError) {
        let (method, sub, body) = changesRequest(since: start, feed: ["feed=continuous", "heartbeat=\(Int(Self.heartbeat * 1000))"])
        let feed = try await remote.stream(method, sub, json: body, timeout: Self.heartbeat * 3)
        var pending: [UInt8] = []
        var pieces = feed.body.makeAsyncIterator()
        while true {
            let piece: [UInt8]?
            do { piece = try await pieces.next() } catch {
                throw (error as? HTTPClientError).map(CouchRemote.map) ?? .connection("\(error)")
            }
            guard let piece else { return }
            pending += piece
            var rows: [Row] = []
            var lastSeq: JSONValue?
            while let end = pending.firstIndex(of: 10) {
                let line = Array(pending[..<end])
                pending.removeSubrange(...end)
                guard line.contains(where: { $0 != 32 && $0 != 13 && $0 != 9 }) else { continue }  // a heartbeat
                guard let o = (try? JSONParser.parse(line, sizeLimit: Self.maxLine))?.objectValue else {
                    throw .protocolError("a continuous _changes line is not a JSON object")
                }
                if o["last_seq"] != nil { return }  // the server ended the feed
                guard let id = o["id"]?.stringValue else { continue }
                let revs = (o["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["rev"]?.stringValue }
                if !revs.isEmpty { rows.append(Row(id: id, revisions: revs)) }
                lastSeq = o["seq"] ?? lastSeq
            }
            guard pending.count <= Self.maxLine else { throw .protocolError("a continuous _changes line over \(Self.maxLine) bytes") }
            guard let lastSeq else { continue }
            try await take(rows, lastSeq: lastSeq, stats: &stats)
            reporter.caughtUp(.pull)
        }
    }

    /// The longest line of the continuous feed accepted (a row names one document's leaves).
    static let maxLine = 16 << 20

    /// Fetches, stores and checkpoints one batch of the continuous feed.
    private func take(_ rows: [Row], lastSeq: JSONValue, stats: inout [String: Int]) async throws(ReplicationError) {
        await store(try await fetchPage(rows, lastSeq: lastSeq), stats: &stats)
        try await checkpoint.save(seq: lastSeq, stats: stats)
    }

    /// What `rows` lack here, fetched with their attachments: one page, ready to store.
    private func fetchPage(_ rows: [Row], lastSeq: JSONValue?) async throws(ReplicationError) -> Page {
        var page = Page(rows: rows.count, lastSeq: lastSeq)
        guard !rows.isEmpty else { return page }
        let missing = try missingRevisions(rows)
        page.checked = rows.reduce(0) { $0 + $1.revisions.count }
        page.missing = missing.reduce(0) { $0 + $1.revisions.count }
        (page.docs, page.failures) = try await fetch(missing)
        try await fetchAttachments(&page.docs)
        return page
    }

    /// Stores a fetched page in one transaction, with its progress and counters.
    private func store(_ page: Page, stats: inout [String: Int]) async {
        guard page.rows > 0 else { return }
        reporter.found(page.rows, direction: .pull)
        stats["missing_checked", default: 0] += page.checked
        stats["missing_found", default: 0] += page.missing
        stats["docs_read", default: 0] += page.docs.count
        let written = await store(page.docs)
        stats["docs_written", default: 0] += written
        stats["doc_write_failures", default: 0] += page.failures + (page.docs.count - written)
        reporter.completed(page.rows)
    }

    /// One change row: the document and its leaf revisions.
    struct Row: Sendable {
        let id: String
        let revisions: [String]
    }

    /// One page of `_changes` after `since`, and its `last_seq`.
    private func changes(since: JSONValue) async throws(ReplicationError) -> ([Row], JSONValue?) {
        let (method, sub, body) = changesRequest(since: since, feed: ["limit=\(configuration.batchSize)"])
        let json = try await remote.expect(method, sub, json: body)
        guard let results = json.objectValue?["results"]?.arrayValue else {
            throw .protocolError("_changes answered without results")
        }
        var rows: [Row] = []
        rows.reserveCapacity(results.count)
        for r in results {
            guard let o = r.objectValue, let id = o["id"]?.stringValue else { continue }
            let revs = (o["changes"]?.arrayValue ?? []).compactMap { $0.objectValue?["rev"]?.stringValue }
            if !revs.isEmpty { rows.append(Row(id: id, revisions: revs)) }
        }
        return (rows, json.objectValue?["last_seq"])
    }

    /// The `_changes` request after `since` with `feed` parameters: every leaf
    /// (`style=all_docs`) and the configured filter (`doc_ids` and `selector` go in a POST
    /// body, a design filter and its parameters in the query).
    private func changesRequest(since: JSONValue, feed: [String]) -> (method: String, sub: String, body: JSONValue?) {
        var query = ["style=all_docs", "since=" + CouchRemote.encode(Self.sequenceText(since))] + feed
        var body: JSONValue?
        if let ids = configuration.documentIDs {
            query.append("filter=_doc_ids")
            body = .object(["doc_ids": .array(ids.map { .string($0) })])
        } else if let selector = configuration.selector {
            query.append("filter=_selector")
            body = .object(["selector": selector])
        } else if let filter = configuration.pullFilter {
            query.append("filter=" + CouchRemote.encode(filter))
            for (k, v) in configuration.pullFilterParameters.sorted(by: { $0.key < $1.key }) {
                query.append(CouchRemote.encode(k) + "=" + CouchRemote.encode(v))
            }
        }
        return (body == nil ? "GET" : "POST", "_changes?" + query.joined(separator: "&"), body)
    }

    /// A sequence as `since=` takes it: CouchDB 2+ sequences are opaque strings, 1.x ones numbers.
    static func sequenceText(_ seq: JSONValue) -> String {
        switch seq {
        case .string(let s): return s
        case .int(let n): return String(n)
        default: return String(decoding: CanonicalJSON.encode(seq), as: UTF8.self)
        }
    }

    /// One document's revisions to fetch.
    struct Missing: Sendable {
        let id: String
        let revisions: [String]
    }

    /// The rows' revisions this database lacks (a local `_revs_diff`).
    private func missingRevisions(_ rows: [Row]) throws(ReplicationError) -> [Missing] {
        let trees: [String: RevisionTree]
        do { trees = try database.revisionTrees(of: rows.map(\.id)) } catch { throw .store(error) }
        var out: [Missing] = []
        for row in rows {
            let tree = trees[row.id]
            let missing = row.revisions.filter { text in
                guard let tree, let rev = try? RevisionID(text) else { return true }
                return tree.nodes[rev] == nil
            }
            guard !missing.isEmpty else { continue }
            out.append(Missing(id: row.id, revisions: missing))
        }
        return out
    }

    /// Fetches `missing` with `_bulk_get`, `maxConcurrentFetches` requests at a time; returns
    /// the documents (in no particular order) and how many could not be fetched.
    private func fetch(_ missing: [Missing]) async throws(ReplicationError) -> ([[String: JSONValue]], Int) {
        var requests: [[JSONValue]] = []
        var current: [JSONValue] = []
        for m in missing {
            for rev in m.revisions {
                current.append(.object(["id": .string(m.id), "rev": .string(rev)]))
                if current.count == Self.fetchChunk { requests.append(current); current = [] }
            }
        }
        if !current.isEmpty { requests.append(current) }
        let remote = self.remote
        let width = max(1, configuration.maxConcurrentFetches)
        let results: Result<[[JSONValue]], ReplicationError> = await withTaskGroup(of: Result<[JSONValue], ReplicationError>.self) { group in
            var next = 0
            var out: [[JSONValue]] = []
            func add() {
                let docs = requests[next]
                next += 1
                group.addTask {
                    do throws(ReplicationError) { return .success(try await Self.bulkGet(docs, from: remote)) } catch {
                        return .failure(error)
                    }
                }
            }
            while next < min(width, requests.count) { add() }
            for await r in group {
                switch r {
                case .failure(let e):
                    group.cancelAll()
                    return .failure(e)
                case .success(let rows):
                    out.append(rows)
                    if next < requests.count { add() }
                }
            }
            return .success(out)
        }
        var docs: [[String: JSONValue]] = []
        var failures = 0
        for result in try results.get().joined() {
            guard let o = result.objectValue else { continue }
            let id = o["id"]?.stringValue ?? "?"
            for d in o["docs"]?.arrayValue ?? [] {
                if let doc = d.objectValue?["ok"]?.objectValue {
                    docs.append(doc)
                } else if let error = d.objectValue?["error"]?.objectValue {
                    failures += 1
                    let reason = error["reason"]?.stringValue ?? error["error"]?.stringValue ?? "unknown error"
                    reporter.event(DocumentEvent(direction: .pull, documentID: id, revisionID: error["rev"]?.stringValue, isDeleted: false,
                                                 kind: .failed(.remote(domain: "HTTP", code: 404, message: reason))))
                }
            }
        }
        return (docs, failures)
    }

    /// `_bulk_get` of `docs` (`[{"id","rev"}]`), its `results` rows. A server
    /// without `_bulk_get` (CouchDB 1.x, some PouchDB servers: 400, 404, 405 or 501) is asked
    /// document by document with `GET /db/id?open_revs=[…]` instead, from then on, its answers
    /// put in the same shape (RP "Fetch Changed Documents").
    static func bulkGet(_ docs: [JSONValue], from remote: CouchRemote) async throws(ReplicationError) -> [JSONValue] {
        if !remote.lacksBulkGet {
            let a = try await remote.request("POST", "_bulk_get?revs=true&latest=true", json: .object(["docs": .array(docs)]))
            if (200..<300).contains(a.status) { return a.json.objectValue?["results"]?.arrayValue ?? [] }
            guard [400, 404, 405, 501].contains(a.status) else { throw CouchRemote.failure(a, "POST _bulk_get") }
            remote.noteLacksBulkGet()
        }
        // One GET per document, all its wanted revisions at once.
        var order: [String] = []
        var wanted: [String: (revs: [String], Void)] = [:]
        for d in docs {
            guard let o = d.objectValue, let id = o["id"]?.stringValue, let rev = o["rev"]?.stringValue else { continue }
            if wanted[id] == nil { order.append(id) }
            wanted[id, default: ([], ())].revs.append(rev)
        }
        var rows: [JSONValue] = []
        for id in order {
            guard let w = wanted[id] else { continue }
            let query = "revs=true&latest=true&open_revs="
                + CouchRemote.encode(String(decoding: CanonicalJSON.encode(.array(w.revs.map { .string($0) })), as: UTF8.self))
            let a = try await remote.request("GET", CouchRemote.encodeDocumentID(id) + "?" + query)
            guard (200..<300).contains(a.status), let answers = a.json.arrayValue else {
                guard a.status == 404 else { throw CouchRemote.failure(a, "GET \(id)?open_revs") }
                rows.append(.object(["id": .string(id), "docs": .array(w.revs.map { rev in
                    .object(["error": .object(["id": .string(id), "rev": .string(rev), "error": "not_found", "reason": .string(a.reason)])])
                })]))
                continue
            }
            // `{"ok": doc}` as _bulk_get has it; `{"missing": rev}` as its error.
            let converted: [JSONValue] = answers.map { item in
                if let missing = item.objectValue?["missing"]?.stringValue {
                    return .object(["error": .object(["id": .string(id), "rev": .string(missing), "error": "not_found", "reason": "missing"])])
                }
                return item
            }
            rows.append(.object(["id": .string(id), "docs": .array(converted)]))
        }
        return rows
    }

    /// Fetches, each with its own `GET /db/doc/att?rev=`, the attachments of `docs` (stubs, as
    /// `_bulk_get` without `attachments=true` gives them) that no stored revision here holds
    /// under that name and MD5, `maxConcurrentFetches` at a time; writes them as blobs and puts
    /// the stored entry in the stub's place. A document whose attachment cannot be had keeps
    /// its stub, and is reported when it is stored.
    private func fetchAttachments(_ docs: inout [[String: JSONValue]]) async throws(ReplicationError) {
        var jobs: [(doc: Int, name: String, id: String, rev: String, entry: [String: JSONValue])] = []
        var local: [String: [String: [String: JSONValue]]] = [:]
        for (i, d) in docs.enumerated() {
            guard let id = d["_id"]?.stringValue, let rev = d["_rev"]?.stringValue, case .object(let entries)? = d["_attachments"] else { continue }
            for (name, value) in entries {
                guard let e = value.objectValue, e["stub"]?.boolValue == true else { continue }
                if local[id] == nil { local[id] = CouchDocument.storedEntries(of: id, database: database) }
                if let md5 = e["digest"]?.stringValue, local[id]?[name + "\n" + md5] != nil { continue }
                jobs.append((i, name, id, rev, e))
            }
        }
        guard !jobs.isEmpty else { return }
        let remote = self.remote
        let db = database
        let width = max(1, configuration.maxConcurrentFetches)
        let results: [(Int, String, [String: JSONValue]?)] = await withTaskGroup(of: (Int, String, [String: JSONValue]?).self) { group in
            var next = 0
            var out: [(Int, String, [String: JSONValue]?)] = []
            func add() {
                let job = jobs[next]
                next += 1
                group.addTask {
                    let path = CouchRemote.encodeDocumentID(job.id) + "/" + CouchRemote.encode(job.name) + "?rev=" + CouchRemote.encode(job.rev)
                    guard let a = try? await remote.raw("GET", path), a.status == 200 else { return (job.doc, job.name, nil) }
                    if let stated = job.entry["length"]?.intValue, stated != Int64(a.body.count) { return (job.doc, job.name, nil) }
                    guard let blob = try? db.writeBlob(a.body) else { return (job.doc, job.name, nil) }
                    var entry = job.entry
                    for k in ["stub", "data", "follows", "encoding", "encoded_length"] { entry[k] = nil }
                    entry["digest"] = .string(blob.digest.description)
                    entry["length"] = .int(blob.length)
                    entry[AttachmentMD5.member] = .string(AttachmentMD5.digest(a.body))
                    return (job.doc, job.name, entry)
                }
            }
            while next < min(width, jobs.count) { add() }
            for await r in group {
                out.append(r)
                if next < jobs.count { add() }
            }
            return out
        }
        if Task.isCancelled { throw .stopped }
        for (doc, name, entry) in results {
            guard let entry, case .object(var entries)? = docs[doc]["_attachments"] else { continue }
            entries[name] = .object(entry)
            docs[doc]["_attachments"] = .object(entries)
        }
    }

    /// Inserts the fetched revisions in one transaction, on the database's writer thread;
    /// returns how many were stored.
    private func store(_ docs: [[String: JSONValue]]) async -> Int {
        var revisions: [ReplicatedRevision] = []
        revisions.reserveCapacity(docs.count)
        for d in docs {
            do throws(CouchDocument.Refusal) {
                revisions.append(try CouchDocument.replicated(d, database: database))
            } catch {
                reporter.event(DocumentEvent(direction: .pull, documentID: d["_id"]?.stringValue ?? "?", revisionID: d["_rev"]?.stringValue,
                                             isDeleted: false, kind: .failed(.protocolError(error.reason))))
            }
        }
        let outcomes: [Result<InsertOutcome, StoreError>]
        let pulled = revisions, resolver = configuration.conflictResolver
        do {
            outcomes = try await database.write { (d) throws(StoreError) in
                if let resolver { try d.insert(pulled, resolver: resolver) } else { try d.insert(pulled) }
            }
        } catch {
            logger.error("could not store pulled revisions", metadata: ["error": "\(error)"])
            for r in revisions {
                reporter.event(DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: r.history.first, isDeleted: r.isDeleted,
                                             kind: .failed(.store(error))))
            }
            return 0
        }
        var written = 0
        for (r, outcome) in zip(revisions, outcomes) {
            switch outcome {
            case .success(let o):
                written += 1
                reporter.event(DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: r.history.first, isDeleted: r.isDeleted,
                                             kind: .pulled))
                if o.resolved {
                    reporter.event(DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: o.current?.description,
                                                 isDeleted: false, kind: .conflictResolved))
                }
            case .failure(let e):
                reporter.event(DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: r.history.first, isDeleted: r.isDeleted,
                                             kind: .failed(.store(e))))
            }
        }
        return written
    }
}
