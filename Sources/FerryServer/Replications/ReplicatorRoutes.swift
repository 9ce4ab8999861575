import FerryHTTP
import FerryStore
import FerrySync
import FoundationEssentials

/// The REST face of the managed replications (Protocol/replicator.md), answered by a router
/// hook for server admins only (replication documents hold peer URLs and credentials):
/// `/_replicator` documents, `POST /_replicate`, `/_scheduler/jobs`, `/_scheduler/docs` and
/// Ferry's `/_scheduler/mode`.
enum ReplicatorRoutes {
    /// The hook for a router.
    /// `ownURL` gives this daemon's plain `http://` address as its own clients reach it (nil
    /// while it is not listening, or when it serves TLS only): a `_replicate` between two of
    /// its databases replicates through it.
    static func hook(_ scheduler: ReplicationScheduler, ownURL: @escaping @Sendable () -> String? = { nil })
        -> @Sendable (RESTRequest, RESTRouter) async -> RESTResponse? {
        { request, router in
            guard let first = request.segments.first, ["_replicator", "_replicate", "_scheduler", "_active_tasks"].contains(first) else { return nil }
            do {
                return try await route(first, request, router, scheduler, ownURL)
            } catch {
                return RESTError.from(error).response
            }
        }
    }

    /// A server admin's request to `first`. A function of its own, not inlined: with this body
    /// inside the hook's closure, Swift 6.3.1's optimizer crashes (signal 11 splitting the
    /// closure's coroutine, in `emitSetAndGetSwiftErrorValueAround`) in release builds.
    @inline(never)
    private static func route(_ first: String, _ request: RESTRequest, _ router: RESTRouter,
                              _ scheduler: ReplicationScheduler, _ ownURL: @Sendable () -> String?) async throws(RESTError) -> RESTResponse {
        let identity = try await router.identify(request)
        guard router.access.isServerAdmin(identity) else { throw RESTError.forbidden("You are not a server admin.") }
        switch first {
        case "_replicator": return try await replicator(request, router, scheduler)
        case "_replicate": return try await replicate(request, router, scheduler, ownURL)
        case "_active_tasks": return try activeTasks(request, scheduler)
        default: return try await schedulerRoute(request, scheduler)
        }
    }

    private static func replicator(_ r: RESTRequest, _ router: RESTRouter, _ scheduler: ReplicationScheduler) async throws(RESTError) -> RESTResponse {
        let s = r.segments
        if s.count == 1 {
            switch r.method {
            case "GET", "HEAD":
                return .json(200, .object(["db_name": "_replicator", "doc_count": .int(Int64(scheduler.entries.filter { !$0.transient }.count)),
                                           "doc_del_count": 0]))
            case "POST":
                let body = try RESTRouter.jsonObject(r)
                let id = body["_id"]?.stringValue ?? RESTRouter.newID()
                return try await put(id, body, r, router, scheduler)
            default: throw .methodNotAllowed("GET,HEAD,POST")
            }
        }
        if s[1] == "_all_docs" {
            try RESTRouter.allow(r, ["GET", "HEAD"])
            let include = r[query: "include_docs"] == "true"
            let rows: [JSONValue] = scheduler.entries.filter { !$0.transient }.map { e in
                var row: [String: JSONValue] = ["id": .string(e.spec.id), "key": .string(e.spec.id), "value": .object(["rev": .string(e.revision)])]
                if include { row["doc"] = ReplicationJob.document(e) }
                return .object(row)
            }
            return .json(200, .object(["total_rows": .int(Int64(rows.count)), "offset": 0, "rows": .array(rows)]))
        }
        let id = s[1]
        if s.count == 3 {
            try RESTRouter.allow(r, ["POST"])
            switch s[2] {
            case "_pause": try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.setPaused(id, true) }
            case "_resume": try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.setPaused(id, false) }
            default: throw .notFound("no route \(r.head.target)")
            }
            return .ok()
        }
        guard s.count == 2 else { throw .notFound("no route \(r.head.target)") }
        switch r.method {
        case "GET", "HEAD":
            guard let e = scheduler.entry(id), !e.transient else { throw .notFound("missing") }
            return .json(200, ReplicationJob.document(e), headers: [("ETag", "\"\(e.revision)\"")])
        case "PUT":
            return try await put(id, try RESTRouter.jsonObject(r, strict: false), r, router, scheduler)
        case "DELETE":
            let rev = r[query: "rev"] ?? r.header("If-Match")?.trimming { $0 == "\"" }
            guard let rev else { throw .conflict }
            try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.remove(id, revision: rev) }
            return .json(200, .object(["ok": true, "id": .string(id), "rev": .string(ReplicationStore.nextRevision(after: rev))]))
        default: throw .methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    private static func put(_ id: String, _ body: [String: JSONValue], _ r: RESTRequest, _ router: RESTRouter,
                            _ scheduler: ReplicationScheduler) async throws(RESTError) -> RESTResponse {
        guard ReplicationSpec.isValidID(id) else {
            throw .badRequest("Invalid replication ID \(id.debugDescription): not empty, no '/', not starting with '_'")
        }
        let spec: ReplicationSpec
        do { spec = try ReplicationSpec(id: id, json: body) } catch { throw .badRequest(error.reason) }
        try createTargetIfAsked(spec, body, router)
        let rev = body["_rev"]?.stringValue ?? r[query: "rev"]
        let exclusively = r[query: "exclusively"] == "true" || body["exclusively"]?.boolValue == true
        let newRev = try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.put(spec, revision: rev, exclusively: exclusively) }
        return .json(201, .object(["ok": true, "id": .string(id), "rev": .string(newRev)]))
    }

    /// `POST /_replicate`: a one-off replication (CouchDB's shape). A one-shot one answers when
    /// done, with its history; a continuous one answers at once with its `_local_id`; `cancel`
    /// stops one by `replication_id`.
    private static func replicate(_ r: RESTRequest, _ router: RESTRouter, _ scheduler: ReplicationScheduler,
                                  _ ownURL: @Sendable () -> String?) async throws(RESTError) -> RESTResponse {
        // CouchDB answers any other method with 400 (it reads the body first).
        guard r.method == "POST" else { throw .badRequest("Missing request body") }
        var body = try RESTRouter.jsonObject(r)
        try nameOwnDatabases(&body, r, router, ownURL)
        try replicateLocally(&body, r, router, ownURL)
        if body["cancel"]?.boolValue == true {
            guard let id = body["replication_id"]?.stringValue, scheduler.entry(id)?.transient == true else {
                throw .notFound("no replication with that replication_id")
            }
            try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.remove(id, revision: nil) }
            return .json(200, .object(["ok": true, "_local_id": .string(id)]))
        }
        let id = "_replicate-" + RESTRouter.newID()
        let spec: ReplicationSpec
        do { spec = try ReplicationSpec(id: id, json: body) } catch { throw .badRequest(error.reason) }
        // A one-off runs now or not at all: a schedule or conditions would leave the request
        // waiting for as long as they do not hold.
        guard spec.schedule == nil, spec.conditions.isEmpty else {
            throw .badRequest("schedule and conditions belong in a _replicator document, not a one-off _replicate")
        }
        try createTargetIfAsked(spec, body, router)
        var (done, error) = try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.runOnce(spec) }
        if spec.continuous { return .json(202, .object(["ok": true, "_local_id": .string(id)])) }
        // A peer whose connection timed out is tried again a few times (1, 2, 3, 4 s apart)
        // before the answer is `db_not_found`, as CouchDB's replicator retries its requests
        // (`retries_per_request`): a peer that is busy is not absent. One that refuses the
        // connection, or cannot be resolved, is answered at once.
        for attempt in 1...4 {
            guard done.journal.state != .completed, case .connection(let reason)? = error, reason.contains("timed out") else { break }
            try? await Task.sleep(for: .seconds(attempt))
            (done, error) = try await call { () throws(ReplicationScheduler.Failure) in try await scheduler.runOnce(spec) }
        }
        let j = done.journal
        guard j.state == .completed else {
            let reason = j.lastError ?? j.history.last?.reason ?? "the replication did not complete"
            // CouchDB's answers: a peer that cannot be reached or has no such database is
            // `db_not_found`; a refusal keeps its status. `failed` is a local database not served.
            if j.state == .failed { throw RESTError(404, "db_not_found", "could not open \(spec.database): \(reason)") }
            switch error {
            case .connection?, .gaveUp?, .invalidURL?, .httpStatus(404, _)?: throw RESTError(404, "db_not_found", "could not open \(spec.peer): \(reason)")
            case .httpStatus(let s, _)? where s == 401 || s == 403: throw RESTError(s, s == 401 ? "unauthorized" : "forbidden", reason)
            default: throw RESTError(500, "replication_failed", reason)
            }
        }
        return .json(200, couchDBAnswer(j, id: id, sourceSequence: sourceSequence(spec, router), byIDs: spec.documentIDs != nil))
    }

    /// A finished one-off in the shape of CouchDB's `_replicate` answer: the session and its
    /// one history entry (RFC 1123 times, counts; `no_changes` when nothing moved).
    /// With `doc_ids` (no checkpoint, no session) CouchDB answers the counts alone.
    static func couchDBAnswer(_ j: ReplicationJournal, id: String, sourceSequence: String, byIDs: Bool) -> JSONValue {
        let session = String(id.drop { $0 != "-" }.dropFirst())
        let written = Int64(j.docsPushed + j.docsPulled)
        func rfc1123(_ t: Double) -> String { HTTPDate.format(secondsSince1970: Int(t.rounded(.down))) }
        let entry: JSONValue = .object([
            "session_id": .string(session), "start_time": .string(rfc1123(j.startTime)),
            "end_time": .string(rfc1123(j.lastUpdated)),
            "start_last_seq": "0", "end_last_seq": .string(sourceSequence), "recorded_seq": .string(sourceSequence),
            "missing_checked": .int(written + Int64(j.docWriteFailures)), "missing_found": .int(written + Int64(j.docWriteFailures)),
            "docs_read": .int(written + Int64(j.docWriteFailures)), "docs_written": .int(written),
            "doc_write_failures": .int(Int64(j.docWriteFailures)),
        ])
        if byIDs, case .object(var flat) = entry {
            for k in ["start_last_seq", "end_last_seq", "recorded_seq", "missing_checked", "missing_found"] { flat[k] = nil }
            flat["ok"] = true
            flat["replication_id_version"] = 4
            return .object(flat)
        }
        var o: [String: JSONValue] = ["ok": true, "session_id": .string(session), "source_last_seq": .string(sourceSequence),
                                      "replication_id_version": 4, "history": .array([entry])]
        if written == 0 && j.docWriteFailures == 0 { o["no_changes"] = true }
        return .object(o)
    }

    /// The source's update sequence when it is local (a peer's is its own business).
    private static func sourceSequence(_ spec: ReplicationSpec, _ router: RESTRouter) -> String {
        guard spec.direction != .pull, let db = router.registry.database(spec.database) else { return "0" }
        return String(db.lastSequence)
    }

    /// CouchDB's replicator is given full URLs even for its own databases: a URL that names
    /// this server (its `Host`, or the address it listens on) is read as the local database
    /// it names, so a `_replicate` written for CouchDB runs here as a push or a pull. When
    /// both name this server the source becomes local and the target stays a URL (its
    /// credentials are the caller's own).
    private static func nameOwnDatabases(_ body: inout [String: JSONValue], _ r: RESTRequest, _ router: RESTRouter,
                                         _ ownURL: @Sendable () -> String?) throws(RESTError) {
        var urls: [String: String] = [:]
        for key in ["source", "target"] {
            if let o = body[key]?.objectValue {
                do { urls[key] = try ReplicationSpec.url(of: o, key) } catch { throw .badRequest(error.reason) }
            } else if let s = body[key]?.stringValue {
                urls[key] = s
            }
        }
        guard let source = urls["source"], let target = urls["target"],
              ReplicationSpec.isRemote(source), ReplicationSpec.isRemote(target) else { return }
        var own = Set<String>()
        if let host = r.header("Host") { own.insert(host.lowercased()) }
        if let base = ownURL(), let c = URLComponents(string: base), let h = c.host, let p = c.port {
            own.insert("\(h):\(p)")
            if h == "127.0.0.1" { own.insert("localhost:\(p)") }
        }
        func localName(_ url: String) -> String? {
            guard let c = URLComponents(string: url), let h = c.host?.lowercased(), own.contains(c.port.map { "\(h):\($0)" } ?? h) else { return nil }
            let path = c.path.split(separator: "/", omittingEmptySubsequences: true)
            guard path.count == 1 else { return nil }
            return String(path[0])
        }
        if let name = localName(source) {
            body["source"] = .string(name)
            body["target"] = .string(target)
            // The target is a URL here too: `create_target` is for this server to do.
            if let targetName = localName(target) { try createIfAsked(targetName, body, router) }
        } else if let name = localName(target) {
            body["target"] = .string(name)
            body["source"] = .string(source)
        }
    }

    /// CouchDB's `create_target: true`: the target database is made first when it is missing,
    /// with `create_target_params` as the parameters of its `PUT /{db}` (Ferry reads
    /// `conflict_policy`; CouchDB's cluster parameters mean nothing here). Ferry makes only a
    /// local database: the target of a pull, or the database of a two-way replication. In a
    /// push the target is the peer, which must have it (else the job fails `db_not_found`).
    private static func createTargetIfAsked(_ spec: ReplicationSpec, _ body: [String: JSONValue],
                                            _ router: RESTRouter) throws(RESTError) {
        guard spec.direction != .push else { return }
        try createIfAsked(spec.database, body, router)
    }

    /// Makes local database `name` when the body asks (`create_target`), with
    /// `create_target_params.conflict_policy`.
    private static func createIfAsked(_ name: String, _ body: [String: JSONValue], _ router: RESTRouter) throws(RESTError) {
        guard body["create_target"]?.boolValue == true else { return }
        var policy: ConflictPolicy?
        if let params = body["create_target_params"], params != .null {
            guard let o = params.objectValue else { throw .badRequest("create_target_params must be an object") }
            if let value = o["conflict_policy"] {
                policy = try RESTRouter.conflictPolicy(value.stringValue ?? "", parameter: "create_target_params.conflict_policy")
            }
        }
        guard router.registry.database(name) == nil else { return }
        do {
            _ = try router.registry.create(name, conflictPolicy: policy)
        } catch where error.status == 412 {
            // Made by another request meanwhile: it is there, which is what was asked.
        }
    }

    /// Two local databases (CouchDB 3 takes their names): the target becomes this daemon's
    /// own URL, reached with the caller's Basic credentials — the replication runs as the
    /// caller, through the same access checks as any other client.
    private static func replicateLocally(_ body: inout [String: JSONValue], _ r: RESTRequest, _ router: RESTRouter,
                                         _ ownURL: @Sendable () -> String?) throws(RESTError) {
        guard let source = body["source"]?.stringValue, let target = body["target"]?.stringValue,
              !ReplicationSpec.isRemote(source), !ReplicationSpec.isRemote(target) else { return }
        if (try? DatabaseName(target)) != nil { try createIfAsked(target, body, router) }
        guard let base = ownURL() else {
            throw .badRequest("between two local databases give the target as an http(s):// URL of this server (it serves TLS only)")
        }
        guard let authorization = r.header("Authorization"), let (user, password) = AccessControl.basicCredentials(authorization) else {
            throw .badRequest("between two local databases, log in with Basic credentials or give the target as a URL with them")
        }
        var url = URLComponents(string: base)
        url?.user = user
        url?.password = password
        url?.percentEncodedPath = "/" + PercentEncoding.encode(target)
        guard let full = url?.string else { throw .badRequest("target \(target.debugDescription) is not a database name") }
        body["target"] = .string(full)
    }

    /// `GET /_active_tasks`: the replications running now, in CouchDB's task shape (the
    /// other task kinds CouchDB lists — compactions, indexers — finish inside their request
    /// here and never show).
    private static func activeTasks(_ r: RESTRequest, _ scheduler: ReplicationScheduler) throws(RESTError) -> RESTResponse {
        guard r.segments.count == 1 else { throw .notFound("no route \(r.head.target)") }
        try RESTRouter.allow(r, ["GET", "HEAD"])
        let tasks: [JSONValue] = scheduler.entries.compactMap { e in
            let job = ReplicationJob.job(e, session: scheduler.session(e.spec.id))
            guard job.state == "running" else { return nil }
            var o: [String: JSONValue] = [
                "type": "replication", "node": .string(job.node), "pid": .string("<ferry.\(job.id)>"),
                "replication_id": .string(job.id), "doc_id": job.documentID.map { .string($0) } ?? .null,
                "database": job.documentID == nil ? .null : "_replicator",
                "source": .string(job.source), "target": .string(job.target), "continuous": .bool(job.continuous),
                "docs_read": .int(job.info.docsRead), "docs_written": .int(job.info.docsWritten),
                "doc_write_failures": .int(job.info.docWriteFailures),
                "changes_pending": job.info.changesPending.map { .int($0) } ?? .null,
                "user": .null,
            ]
            let started = job.startTime.flatMap { try? Date.ISO8601FormatStyle().parse($0) }
            let updated = job.lastUpdated.flatMap { try? Date.ISO8601FormatStyle().parse($0) }
            o["started_on"] = .int(Int64(started?.timeIntervalSince1970 ?? 0))
            o["updated_on"] = .int(Int64((updated ?? started)?.timeIntervalSince1970 ?? 0))
            return .object(o)
        }
        return .json(200, .array(tasks))
    }

    private static func schedulerRoute(_ r: RESTRequest, _ scheduler: ReplicationScheduler) async throws(RESTError) -> RESTResponse {
        let s = r.segments
        guard s.count >= 2 else { throw .notFound("no route \(r.head.target)") }
        switch s[1] {
        case "jobs":
            try RESTRouter.allow(r, ["GET", "HEAD"])
            if s.count == 3 {
                guard let e = scheduler.entry(s[2]) else { throw .notFound("unknown job \(s[2])") }
                return .json(200, ReplicationJob.job(e, session: scheduler.session(e.spec.id)).json)
            }
            let jobs = scheduler.entries.map { ReplicationJob.job($0, session: scheduler.session($0.spec.id)).json }
            return .json(200, .object(["total_rows": .int(Int64(jobs.count)), "offset": 0, "jobs": .array(jobs)]))
        case "docs":
            try RESTRouter.allow(r, ["GET", "HEAD"])
            let docs = scheduler.entries.filter { !$0.transient }
            if s.count == 4, s[2] == "_replicator" {
                guard let e = docs.first(where: { $0.spec.id == s[3] }) else { throw .notFound("missing") }
                return .json(200, ReplicationJob.doc(e))
            }
            return .json(200, .object(["total_rows": .int(Int64(docs.count)), "offset": 0, "docs": .array(docs.map(ReplicationJob.doc))]))
        case "mode":
            switch r.method {
            case "GET", "HEAD": break
            case "PUT", "POST":
                let body = try RESTRouter.jsonObject(r)
                guard let m = body["mode"]?.stringValue.flatMap(ReplicationScheduler.Mode.init(rawValue:)) else {
                    throw .badRequest(#"mode must be "active" or "background""#)
                }
                scheduler.setMode(m)
            default: throw .methodNotAllowed("GET,HEAD,PUT")
            }
            return .json(200, .object(["mode": .string(scheduler.mode.rawValue)]))
        default:
            throw .notFound("no route \(r.head.target)")
        }
    }

    private static func call<T>(_ body: () async throws(ReplicationScheduler.Failure) -> T) async throws(RESTError) -> T {
        do { return try await body() } catch {
            switch error {
            case .notFound(let s): throw .notFound(s)
            case .conflict(let s): throw RESTError(409, "conflict", s)
            case .io(let s): throw RESTError(500, "io_error", s)
            }
        }
    }
}
