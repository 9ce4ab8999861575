import FerryStore
import FerrySync
import FoundationEssentials

/// `GET|POST /{db}/_changes` (Protocol/rest.md, "Changes feed"): `feed=normal`, `longpoll`,
/// `continuous` (one JSON line per change) and `eventsource` (Server-Sent Events), with
/// `since` (a sequence or `now`), `limit`, `include_docs`, `heartbeat`, `timeout`,
/// `style=all_docs`, the `_doc_ids` filter (`doc_ids` in the query or body) and named filters
/// registered with `registerPullFilter` (the query's other parameters are theirs).
extension RESTRouter {
    /// The parsed parameters of one feed.
    struct ChangesQuery: Sendable {
        var feed = "normal"
        var since: Int64 = 0
        var limit = Int.max
        var includeDocs = false
        var heartbeat: Double?
        var timeout: Double?
        var docIDs: Set<String>?
        /// `style=all_docs`: every leaf revision, not only the current one (what CouchDB's
        /// replicator asks for, so branches replicate).
        var allLeaves = false
        /// A named filter and its parameters (the query's other parameters).
        var filter: PullFilter?
        var filterParameters: [String: String] = [:]
        /// `descending=true`: newest first, from the end (CouchDB ignores `since` then).
        var descending = false
        /// `conflicts=true`: each `doc` carries `_conflicts`.
        var conflicts = false
        /// `attachments=true`: each `doc` carries its attachments' data inline.
        var attachments = false
        /// `seq_interval=N`: only every Nth row (and the last) carries its `seq` (CouchDB's
        /// saving for replicators that checkpoint seldom); the others say null.
        var seqInterval: Int?
        /// `filter=_selector` (CouchDB reports no `pending` then).
        var selector = false
    }

    func changes(_ c: Context) async throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "POST"])
        var q = try Self.changesQuery(c)
        if c.request[query: "filter"] == "_selector" {
            q.filter = try Self.selectorFilter(c)
            q.selector = true
        } else if let name = c.request[query: "filter"], name != "_doc_ids" {
            var found = pullFilters.withLock { $0[name] }
            if found == nil { found = try Self.builtInFilter(name, c.db) }
            guard let f = found else {
                throw .badRequest("`filter` must be of the form `designname/filtername`")
            }
            q.filter = f
            let own: Set<String> = ["feed", "since", "limit", "include_docs", "heartbeat", "timeout", "filter", "style", "doc_ids", "descending"]
            for (k, v) in c.request.query where !own.contains(k) { q.filterParameters[k] = v }
        }
        switch q.feed {
        case "normal":
            return try changesPage(c.db, q).response(tagged: true)
        case "longpoll":
            var page = try changesPage(c.db, q)
            if page.rows.isEmpty, let heartbeat = q.heartbeat {
                return longpollWithHeartbeat(c.db, q, page, every: heartbeat)
            }
            if page.rows.isEmpty {
                // Ends early when the task is cancelled: the client closed its side.
                await Self.waitForChange(c.db, after: page.last, timeout: q.timeout ?? 60)
                page = try changesPage(c.db, q)
            }
            return page.response(tagged: false)
        case "continuous", "eventsource":
            return continuousChanges(c.db, q, eventSource: q.feed == "eventsource")
        default:
            throw .badRequest("feed must be normal, longpoll, continuous or eventsource")
        }
    }

    /// `filter=_selector` with `{"selector":{…}}` in the body: a Mango selector (what `_find`
    /// takes, CouchDB's semantics) over each change's current revision.
    static func selectorFilter(_ c: Context) throws(RESTError) -> PullFilter {
        guard c.request.method == "POST", let json = try jsonObject(c.request)["selector"], case .object = json else {
            throw .badRequest("Selector must be specified in POST payload")
        }
        let selector: MangoSelector
        do { selector = try MangoSelector(json: json) } catch { throw RESTError(error.status, error.error, error.reason) }
        return { doc, _, _ in selector.matches(doc) }
    }

    /// CouchDB's built-in `_design` filter (design documents only); nil for a name that is
    /// not built in. Filters CouchDB runs from design documents — `_view` and `ddoc/name` —
    /// are 501 naming what Ferry does not run (404 when `ddoc` is not there, as CouchDB
    /// answers), so a replication that asks for one fails saying why instead of copying
    /// everything.
    static func builtInFilter(_ name: String, _ db: Database) throws(RESTError) -> PullFilter? {
        switch name {
        case "_design": return { doc, _, _ in Document.isDesignID(doc.id) }
        case "_view": throw .notImplemented("Ferry does not run JavaScript views (_view filter)")
        case let n where n.contains("/"):
            let ddoc = Document.designPrefix + n.prefix { $0 != "/" }
            let exists: Bool
            do { exists = try db.document(ddoc) != nil } catch { throw RESTError(error) }
            guard exists else { throw .notFound("missing") }
            throw .notImplemented("Ferry does not run JavaScript filter functions (\(n))")
        default: return nil
        }
    }

    static func changesQuery(_ c: Context) throws(RESTError) -> ChangesQuery {
        let r = c.request
        var q = ChangesQuery()
        var params: [String: String] = [:]
        for (k, v) in r.query { params[k] = v }
        var bodyIDs: [JSONValue]?
        if r.method == "POST", !r.body.isEmpty {
            let o = try jsonObject(r)
            bodyIDs = o["doc_ids"]?.arrayValue
            for (k, v) in o where k != "doc_ids" {
                params[k] = v.stringValue ?? String(decoding: CanonicalJSON.encode(v), as: UTF8.self)
            }
        }
        q.feed = params["feed"] ?? "normal"
        if let since = params["since"] {
            if since == "now" {
                q.since = c.db.lastSequence
            } else {
                // CouchDB 2+ sequences are opaque strings; Ferry's are integers, possibly quoted.
                guard let n = Int64(since.trimming { $0 == "\"" }.split(separator: "-").first ?? ""), n >= 0 else {
                    throw .badRequest("since must be a sequence number or \"now\"")
                }
                q.since = n
            }
        }
        func number(_ name: String) throws(RESTError) -> Double? {
            guard let v = params[name] else { return nil }
            guard let n = Double(v), n.isFinite, n >= 0 else { throw .badRequest("\(name) must be a non-negative number") }
            // At most 10^12 (ms: 31 years), so Int(limit) and the Durations made from
            // heartbeat and timeout stay in range (limit=1e20 or timeout=1e300 trapped).
            return min(n, 1e12)
        }
        if let l = try number("limit") { q.limit = Int(l) }
        q.timeout = try number("timeout").map { $0 / 1000 }
        if params["heartbeat"] == "true" {
            // CouchDB's default interval (60 s), or the timeout when shorter.
            q.heartbeat = min(60, max(q.timeout ?? 60, 0.1))
        } else {
            q.heartbeat = try number("heartbeat").map { max($0, 100) / 1000 }
        }
        q.includeDocs = params["include_docs"] == "true"
        q.allLeaves = params["style"] == "all_docs"
        q.descending = params["descending"] == "true"
        q.conflicts = params["conflicts"] == "true"
        q.attachments = params["attachments"] == "true"
        if let style = params["style"], style != "main_only", style != "all_docs" {
            throw .badRequest("style must be main_only or all_docs")
        }
        if let n = try number("seq_interval") { q.seqInterval = max(1, Int(n)) }
        if params["filter"] == "_doc_ids" {
            var ids = bodyIDs
            if ids == nil, let text = params["doc_ids"] { ids = queryJSON(text).arrayValue }
            guard let ids else { throw .badRequest("filter=_doc_ids needs doc_ids") }
            q.docIDs = Set(ids.compactMap(\.stringValue))
        }
        return q
    }

    /// One page of changes after `q.since`.
    struct ChangesPage {
        var rows: [JSONValue]
        var last: Int64
        var pending: Int
        var json: JSONValue {
            .object(["results": .array(rows), "last_seq": .string(String(last)), "pending": .int(Int64(pending))])
        }

        /// The page as CouchDB lays it out: `{"results":[`, one row per line, then `],` and
        /// `"last_seq"` on a line of their own — line-by-line readers in client libraries
        /// depend on it.
        var bytes: [UInt8] {
            var out = Array(#"{"results":["#.utf8)
            out.append(10)
            for (i, row) in rows.enumerated() {
                if i > 0 { out += [44, 10] }
                out += CanonicalJSON.encode(row)
            }
            out += Array("\n],\n\"last_seq\":\"\(last)\",\"pending\":\(pending)}\n".utf8)
            return out
        }

        /// The answer: `bytes`, chunked as CouchDB streams it; a normal feed's tagged with an
        /// opaque `ETag` (a digest of what was sent), a longpoll's not, as CouchDB's.
        func response(tagged: Bool) -> RESTResponse {
            let body = bytes
            var headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("Cache-Control", "must-revalidate")]
            if tagged { headers.append(("ETag", RESTRouter.opaqueETag(body))) }
            var r = RESTResponse(status: 200, headers: headers,
                                 body: .stream(AsyncStream { c in
                                     c.yield(body)
                                     c.finish()
                                 }))
            r.isFeed = false
            return r
        }
    }

    func changesPage(_ db: Database, _ q: ChangesQuery) throws(RESTError) -> ChangesPage {
        var rows: [JSONValue] = []
        // Descending starts from the end (CouchDB ignores `since` then).
        var position = q.descending ? Int64.max : q.since
        do {
            while rows.count < q.limit {
                let want = min(1000, q.limit - rows.count)
                let batch = q.descending ? try db.changesDescending(before: position, limit: want) : try db.changes(since: position, limit: want)
                if batch.isEmpty { break }
                for change in batch {
                    position = change.sequence
                    if let row = try Self.changeRow(db, change, q) { rows.append(row) }
                    if rows.count >= q.limit { break }
                }
            }
            if q.descending {
                let pending = position == .max ? 0 : try db.pendingChangeCount(before: position)
                return ChangesPage(rows: Self.thinned(rows, every: q.seqInterval), last: position == .max ? db.lastSequence : position, pending: pending)
            }
            // CouchDB's count: the changes after `since`, less the rows sent (filtered out ones
            // count as pending).
            let pending = q.selector ? 0 : max(0, try db.pendingChangeCount(since: q.since) - rows.count)
            return ChangesPage(rows: Self.thinned(rows, every: q.seqInterval), last: position, pending: pending)
        } catch { throw RESTError(error) }
    }

    /// `rows` with `seq` only on every `every`th row and the last (`seq_interval`).
    static func thinned(_ rows: [JSONValue], every: Int?) -> [JSONValue] {
        guard let every, every > 1 else { return rows }
        return rows.enumerated().map { i, row in
            guard i % every != 0, i != rows.count - 1, var o = row.objectValue else { return row }
            o["seq"] = .null
            return .object(o)
        }
    }

    static func changeRow(_ db: Database, _ change: Change, _ q: ChangesQuery) throws(StoreError) -> JSONValue? {
        if let ids = q.docIDs, !ids.contains(change.documentID) { return nil }
        if let filter = q.filter {
            guard let doc = try db.revision(change.revisionID, of: change.documentID),
                  filter(doc, change.isDeleted ? .deleted : [], q.filterParameters) else { return nil }
        }
        var revs = [change.revisionID]
        // Every leaf, deleted and closed ones too (CouchDB lists deleted leaves): a conflict
        // Ferry resolved is a closed branch, and a CouchDB-protocol copy keeps it.
        if q.allLeaves, let tree = try db.revisionTree(of: change.documentID) {
            revs += tree.leaves.map(\.revisionID).filter { $0 != change.revisionID }.sorted(by: >)
        }
        var o: [String: JSONValue] = [
            "seq": .string(String(change.sequence)),
            "id": .string(change.documentID),
            "changes": .array(revs.map { .object(["rev": .string($0.description)]) }),
        ]
        if change.isDeleted { o["deleted"] = true }
        if q.includeDocs {
            if let d = try db.revision(change.revisionID, of: change.documentID) {
                let tree = q.conflicts ? try db.revisionTree(of: change.documentID) : nil
                var doc = DocumentJSON.object(d, tree: tree, revs: false, revsInfo: false, conflicts: q.conflicts)
                if q.attachments, var body = doc.objectValue, d.properties["_attachments"] != nil {
                    // From the stored entries (with their digests), not the stubs shown.
                    body["_attachments"] = AttachmentRendering.render(db, d.properties, mode: .inline).doc["_attachments"]
                    doc = .object(body)
                }
                o["doc"] = doc
            } else {
                o["doc"] = .null
            }
        }
        return .object(o)
    }

    /// A longpoll with `heartbeat`: the answer starts at once and carries a newline every
    /// `every` seconds while it waits (as CouchDB's does, so proxies and clients see it is
    /// alive), then the page — JSON after leading whitespace. With a heartbeat, `timeout`
    /// still ends the wait (60 s when not given). A client that leaves cancels the stream's
    /// consumer, which ends the wait. The stream is pulled: nothing is made before the
    /// connection is ready to send it.
    func longpollWithHeartbeat(_ db: Database, _ q: ChangesQuery, _ empty: ChangesPage, every: Double) -> RESTResponse {
        let feed = LongpollHeartbeatFeed(router: self, db: db, query: q, empty: empty, every: every)
        var response = RESTResponse(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "must-revalidate")],
                                    body: .stream(AsyncStream(unfolding: { await feed.next() })))
        response.isFeed = true
        return response
    }

    /// Waits until the database has a change after `sequence`, or `timeout` seconds.
    static func waitForChange(_ db: Database, after sequence: Int64, timeout: Double) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await db.waitForChange(after: sequence) }
            group.addTask { try? await Task.sleep(for: .seconds(timeout)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// A feed that stays open: each change as it is committed, a heartbeat while idle, and
    /// (continuous only) `{"last_seq":…}` when `timeout` passes with nothing sent. Pulled by
    /// the connection as it can send (`ContinuousChangesFeed`): a client that reads slowly
    /// slows the feed instead of growing the daemon's memory.
    func continuousChanges(_ db: Database, _ q: ChangesQuery, eventSource: Bool) -> RESTResponse {
        let feed = ContinuousChangesFeed(db: db, query: q, eventSource: eventSource)
        let type = eventSource ? "text/event-stream" : "application/json"
        var response = RESTResponse(status: 200, headers: [("Content-Type", type), ("Cache-Control", eventSource ? "no-cache" : "must-revalidate")],
                                    body: .stream(AsyncStream(unfolding: { await feed.next() })))
        response.isFeed = true
        return response
    }

    /// Whether a change came after `sequence` within `seconds`.
    static func waitOrTimeout(_ db: Database, after sequence: Int64, seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await db.waitForChange(after: sequence) }
            group.addTask { try? await Task.sleep(for: .seconds(seconds)); return false }
            let first = await group.next() ?? false
            group.cancelAll()
            return first && db.lastSequence > sequence
        }
    }
}
