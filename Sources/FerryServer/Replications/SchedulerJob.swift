import FerryStore

/// One managed replication as `GET /_scheduler/jobs` lists it (Protocol/replicator.md):
/// CouchDB's fields (`id`, `doc_id`, `database`, `source`, `target`, `start_time`, `info`,
/// `history` newest first) plus Ferry's `state`, `direction`, `continuous`, `transient`,
/// `schedule` and per-document `info.failures`.
///
/// One type for both ends of the wire: the daemon encodes it (`json`) and `ferry` reads it
/// back (`init(json:)`), so the shape is written down once. Reading is lenient — a missing or
/// oddly typed member becomes a default — because a tool should show what a daemon (perhaps
/// an older or newer one) does say rather than nothing; for the same reason `state` and
/// `direction` stay strings, so a state a newer daemon adds is shown as it is named.
public struct SchedulerJob: Sendable, Equatable {
    /// Why a value is not a job at all.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// For people.
        public let description: String
    }

    /// A document that failed, with why and when.
    public struct Failure: Sendable, Equatable {
        /// The document.
        public var documentID: String
        /// Why.
        public var reason: String
        /// When (ISO 8601), if given.
        public var time: String?

        /// A failure; memberwise, for callers that build expectations.
        public init(documentID: String, reason: String, time: String?) {
            (self.documentID, self.reason, self.time) = (documentID, reason, time)
        }
    }

    /// One entry of the job's history (`added`, `started`, `crashed`, …).
    public struct Event: Sendable, Equatable {
        /// When (ISO 8601).
        public var timestamp: String?
        /// What happened.
        public var type: String
        /// Why, for a crash or a stop.
        public var reason: String?

        /// An event; memberwise, for callers that build expectations.
        public init(timestamp: String?, type: String, reason: String?) {
            (self.timestamp, self.type, self.reason) = (timestamp, type, reason)
        }
    }

    /// Changes handled of changes known in the current run.
    public struct Progress: Sendable, Equatable {
        /// Handled.
        public var completed: Int64
        /// Known.
        public var total: Int64
    }

    /// Counters since this daemon started the job (absent from a stopped daemon's file).
    public struct Session: Sendable, Equatable {
        /// When it started (ISO 8601).
        public var started: String?
        /// Revisions pushed since then.
        public var docsPushed: Int64
        /// Revisions pulled since then.
        public var docsPulled: Int64
    }

    /// A periodic job's schedule, in seconds.
    public struct Schedule: Sendable, Equatable {
        /// Between run starts in active mode.
        public var every: Double
        /// The most one run may take (0 = until caught up).
        public var budget: Double
        /// Between run starts in background mode, if it differs.
        public var backgroundEvery: Double?
        /// When the last run started (ISO 8601).
        public var lastRun: String?
    }

    /// The counters and errors (`info`; `_scheduler/docs` and `_replication_stats` show it too).
    public struct Info: Sendable, Equatable {
        /// Documents read from the source (CouchDB's name; pushed plus pulled here).
        public var docsRead: Int64 = 0
        /// Documents written to the target (likewise).
        public var docsWritten: Int64 = 0
        /// Revisions pushed over the job's life.
        public var docsPushed: Int64 = 0
        /// Revisions pulled over the job's life.
        public var docsPulled: Int64 = 0
        /// Documents that could not be written.
        public var docWriteFailures: Int64 = 0
        /// The last error, if the job has one now.
        public var error: String?
        /// When that error happened (ISO 8601).
        public var errorTime: String?
        /// Whether the operator paused it.
        public var paused = false
        /// Progress of the current run, while one runs.
        public var progress: Progress?
        /// Changes known but not yet handled, while a run runs.
        public var changesPending: Int64?
        /// The replicator's activity (`connecting`, `busy`, `idle`, …), while it runs.
        public var activity: String?
        /// Counters since this daemon started the job.
        public var session: Session?
        /// The latest documents that failed, newest first; nil where the view has none
        /// (`_scheduler/docs`, `_replication_stats`).
        public var failures: [Failure]?
    }

    /// The job's ID.
    public var id: String
    /// The `_replicator` document that configures it, if any.
    public var documentID: String?
    /// The local database.
    public var database: String
    /// The source, a local name or a peer's URL.
    public var source: String
    /// The target, a local name or a peer's URL.
    public var target: String
    /// The node that runs it (CouchDB's cluster member; always `ferry` here).
    public var node = "ferry"
    /// `push`, `pull` or `both`.
    public var direction: String
    /// Whether it keeps running after catching up.
    public var continuous: Bool
    /// `initializing`, `running`, `pending`, `crashing`, `completed`, `failed` or `paused`.
    public var state: String
    /// Whether it lives only as long as the daemon (`_replicate`, `--replicate`, discovery).
    public var transient: Bool
    /// When it was added (ISO 8601).
    public var startTime: String?
    /// When its state last changed (ISO 8601).
    public var lastUpdated: String?
    /// Counters and errors.
    public var info: Info
    /// What happened to the job, newest first.
    public var history: [Event]
    /// Its schedule, if periodic.
    public var schedule: Schedule?

    /// The peer: whichever of source and target is a URL (the other is the local database).
    public var peer: String {
        if source.contains("://") { return source }
        if target.contains("://") { return target }
        return direction == "pull" ? source : target
    }
}

extension SchedulerJob {
    /// The job in `_scheduler/jobs` shape.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "database": .string(database), "source": .string(source),
                                      "target": .string(target), "node": .string(node), "direction": .string(direction),
                                      "continuous": .bool(continuous), "state": .string(state), "transient": .bool(transient),
                                      "user": .null, "info": info.json, "schedule": schedule?.json ?? .null]
        o["doc_id"] = documentID.map { .string($0) }
        o["start_time"] = startTime.map { .string($0) }
        o["last_updated"] = lastUpdated.map { .string($0) }
        o["history"] = .array(history.map(\.json))
        return .object(o)
    }

    /// Reads one job; throws only for a value that is not an object (see the type's note on
    /// leniency).
    public init(json: JSONValue) throws(Invalid) {
        guard let o = json.objectValue else { throw Invalid(description: "a scheduler job is a JSON object") }
        id = o["id"]?.stringValue ?? o["doc_id"]?.stringValue ?? "?"
        documentID = o["doc_id"]?.stringValue
        database = o["database"]?.stringValue ?? ""
        source = o["source"]?.stringValue ?? ""
        target = o["target"]?.stringValue ?? ""
        node = o["node"]?.stringValue ?? node
        direction = o["direction"]?.stringValue ?? "both"
        continuous = o["continuous"]?.boolValue ?? false
        state = o["state"]?.stringValue ?? "unknown"
        transient = o["transient"]?.boolValue ?? false
        startTime = o["start_time"]?.stringValue
        lastUpdated = o["last_updated"]?.stringValue
        info = Info(json: o["info"]?.objectValue ?? [:])
        history = (o["history"]?.arrayValue ?? []).compactMap { $0.objectValue.flatMap(Event.init(json:)) }
        schedule = o["schedule"]?.objectValue.flatMap(Schedule.init(json:))
    }

    /// Reads `GET /_scheduler/jobs`' answer (`{"jobs":[…]}`), or a bare array of jobs; what is
    /// not an object is left out.
    public static func list(from json: JSONValue) -> [SchedulerJob] {
        (json.objectValue?["jobs"]?.arrayValue ?? json.arrayValue ?? []).compactMap { try? SchedulerJob(json: $0) }
    }
}

extension SchedulerJob.Info {
    /// `info`'s object.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["docs_read": .int(docsRead), "docs_written": .int(docsWritten), "docs_pushed": .int(docsPushed),
                                      "docs_pulled": .int(docsPulled), "doc_write_failures": .int(docWriteFailures),
                                      "error": error.map { .string($0) } ?? .null, "error_time": errorTime.map { .string($0) } ?? .null,
                                      "paused": .bool(paused)]
        o["progress"] = progress.map { .object(["completed": .int($0.completed), "total": .int($0.total)]) }
        o["changes_pending"] = changesPending.map { .int($0) }
        o["activity"] = activity.map { .string($0) }
        o["session"] = session.map { s in
            var x: [String: JSONValue] = ["docs_pushed": .int(s.docsPushed), "docs_pulled": .int(s.docsPulled)]
            x["started"] = s.started.map { .string($0) }
            return .object(x)
        }
        o["failures"] = failures.map { .array($0.map(\.json)) }
        return .object(o)
    }

    /// Reads `info` leniently.
    init(json o: [String: JSONValue]) {
        docsRead = o["docs_read"]?.intValue ?? 0
        docsWritten = o["docs_written"]?.intValue ?? 0
        docsPushed = o["docs_pushed"]?.intValue ?? 0
        docsPulled = o["docs_pulled"]?.intValue ?? 0
        docWriteFailures = o["doc_write_failures"]?.intValue ?? 0
        error = o["error"]?.stringValue
        errorTime = o["error_time"]?.stringValue
        paused = o["paused"]?.boolValue ?? false
        if let p = o["progress"]?.objectValue, let completed = p["completed"]?.intValue, let total = p["total"]?.intValue {
            progress = SchedulerJob.Progress(completed: completed, total: total)
        }
        changesPending = o["changes_pending"]?.intValue
        activity = o["activity"]?.stringValue
        session = o["session"]?.objectValue.map { s in
            SchedulerJob.Session(started: s["started"]?.stringValue, docsPushed: s["docs_pushed"]?.intValue ?? 0,
                                 docsPulled: s["docs_pulled"]?.intValue ?? 0)
        }
        failures = o["failures"]?.arrayValue?.compactMap { $0.objectValue.map(SchedulerJob.Failure.init(json:)) }
    }
}

extension SchedulerJob.Failure {
    var json: JSONValue {
        var o: [String: JSONValue] = ["doc_id": .string(documentID), "reason": .string(reason)]
        o["time"] = time.map { .string($0) }
        return .object(o)
    }

    init(json f: [String: JSONValue]) {
        self.init(documentID: f["doc_id"]?.stringValue ?? "?", reason: f["reason"]?.stringValue ?? "failed", time: f["time"]?.stringValue)
    }
}

extension SchedulerJob.Event {
    var json: JSONValue {
        var o: [String: JSONValue] = ["type": .string(type)]
        o["timestamp"] = timestamp.map { .string($0) }
        o["reason"] = reason.map { .string($0) }
        return .object(o)
    }

    /// Nil for an entry without a type.
    init?(json e: [String: JSONValue]) {
        guard let type = e["type"]?.stringValue else { return nil }
        self.init(timestamp: e["timestamp"]?.stringValue, type: type, reason: e["reason"]?.stringValue)
    }
}

extension SchedulerJob.Schedule {
    var json: JSONValue {
        var o: [String: JSONValue] = ["every": .double(every), "budget": .double(budget)]
        o["background_every"] = backgroundEvery.map { .double($0) }
        o["last_run"] = lastRun.map { .string($0) }
        return .object(o)
    }

    /// Nil without `every`.
    init?(json s: [String: JSONValue]) {
        guard let every = s["every"]?.doubleValue else { return nil }
        self.init(every: every, budget: s["budget"]?.doubleValue ?? 0, backgroundEvery: s["background_every"]?.doubleValue,
                  lastRun: s["last_run"]?.stringValue)
    }
}
