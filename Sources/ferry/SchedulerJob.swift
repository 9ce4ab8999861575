import FerryStore

/// One replication job as `GET /_scheduler/jobs` lists it (CouchDB's scheduler shape with
/// Ferry's `info`), read leniently: see `StatusSnapshot`.
struct SchedulerJob: Sendable, Equatable {
    /// A document that failed, with why and when.
    struct Failure: Sendable, Equatable {
        /// The document.
        var documentID: String
        /// Why.
        var reason: String
        /// When (ISO 8601), if given.
        var time: String?
    }

    /// One entry of the job's history (`added`, `started`, `crashed`, …).
    struct Event: Sendable, Equatable {
        /// When (ISO 8601).
        var timestamp: String?
        /// What happened.
        var type: String
        /// Why, for a crash or a stop.
        var reason: String?
    }

    /// The job's ID.
    var id: String
    /// The `_replicator` document that configures it, if any.
    var documentID: String?
    /// The local database.
    var database: String
    /// The source, a local name or a peer's URL.
    var source: String
    /// The target, a local name or a peer's URL.
    var target: String
    /// `push`, `pull` or `both`.
    var direction: String
    /// Whether it keeps running after catching up.
    var continuous: Bool
    /// `initializing`, `running`, `pending`, `crashing`, `completed`, `failed` or `paused`.
    var state: String
    /// Documents read from the source.
    var docsRead: Int64
    /// Documents written to the target.
    var docsWritten: Int64
    /// Documents that could not be written.
    var writeFailures: Int64
    /// Changes known but not yet handled, if given.
    var changesPending: Int64?
    /// Changes handled of changes known, if given.
    var progress: (completed: Int64, total: Int64)?
    /// The last error, if the job has one now.
    var error: String?
    /// When that error happened (ISO 8601).
    var errorTime: String?
    /// The latest documents that failed.
    var failures: [Failure]
    /// What happened to the job, oldest first.
    var history: [Event]
    /// The job as the daemon sent it, for `--json`.
    var json: JSONValue

    /// The peer: whichever of source and target is a URL (the other is the local database).
    var peer: String {
        if source.contains("://") { return source }
        if target.contains("://") { return target }
        return direction == "pull" ? source : target
    }

    /// Reads one job object.
    init(_ json: JSONValue) {
        let o = json.objectValue ?? [:]
        let info = o["info"]?.objectValue ?? [:]
        id = o["id"]?.stringValue ?? o["doc_id"]?.stringValue ?? "?"
        documentID = o["doc_id"]?.stringValue
        database = o["database"]?.stringValue ?? ""
        source = o["source"]?.stringValue ?? ""
        target = o["target"]?.stringValue ?? ""
        direction = o["direction"]?.stringValue ?? "both"
        continuous = o["continuous"]?.boolValue ?? false
        state = o["state"]?.stringValue ?? "unknown"
        docsRead = info["docs_read"]?.intValue ?? 0
        docsWritten = info["docs_written"]?.intValue ?? 0
        writeFailures = info["doc_write_failures"]?.intValue ?? 0
        changesPending = info["changes_pending"]?.intValue
        if let p = info["progress"]?.objectValue, let completed = p["completed"]?.intValue, let total = p["total"]?.intValue {
            progress = (completed, total)
        } else {
            progress = nil
        }
        error = info["error"]?.stringValue
        errorTime = info["error_time"]?.stringValue
        failures = (info["failures"]?.arrayValue ?? []).compactMap { f in
            guard let f = f.objectValue else { return nil }
            return Failure(documentID: f["doc_id"]?.stringValue ?? "?", reason: f["reason"]?.stringValue ?? "failed",
                           time: f["time"]?.stringValue)
        }
        history = (o["history"]?.arrayValue ?? []).compactMap { e in
            guard let e = e.objectValue, let type = e["type"]?.stringValue else { return nil }
            return Event(timestamp: e["timestamp"]?.stringValue, type: type, reason: e["reason"]?.stringValue)
        }
        self.json = json
    }

    static func == (a: SchedulerJob, b: SchedulerJob) -> Bool { a.json == b.json }
}
