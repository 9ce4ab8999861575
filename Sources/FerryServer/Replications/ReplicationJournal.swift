import FerryStore
import FoundationEssentials

/// What a managed replication did, kept with its document so that it outlives the daemon:
/// its state, counters, the last error, recent state changes and recent per-document
/// failures, in the shape of CouchDB's `_scheduler/jobs` (Protocol/replicator.md).
public struct ReplicationJournal: Sendable, Equatable {
    /// A managed replication's state, as CouchDB's scheduler names them.
    public enum State: String, Sendable, CaseIterable {
        /// Added; not started yet.
        case initializing
        /// Connected or connecting, moving documents.
        case running
        /// Waiting: for its next periodic run, or for its conditions to hold.
        case pending
        /// Failed and will be retried (the peer unreachable, refused, or an error).
        case crashing
        /// A one-shot replication that finished.
        case completed
        /// Will not be retried until changed: the document is invalid or its database is gone.
        case failed
        /// Paused by the operator.
        case paused
    }

    /// One state change.
    public struct Event: Sendable, Equatable {
        /// When (seconds since 1970).
        public var time: Double
        /// What: added, started, stopped, crashed, completed, paused, resumed, restarted, pending, failed, budget.
        public var type: String
        /// Why, if known.
        public var reason: String?
    }

    /// One document that could not be replicated.
    public struct Failure: Sendable, Equatable {
        /// The document.
        public var documentID: String
        /// Why.
        public var reason: String
        /// When (seconds since 1970).
        public var time: Double
    }

    /// How many events and failures are kept.
    public static let historyLimit = 50
    /// How many per-document failures are kept.
    public static let failureLimit = 100

    /// The state now.
    public var state = State.initializing
    /// When the state last changed.
    public var lastUpdated: Double = Date().timeIntervalSince1970
    /// When the replication was added.
    public var startTime: Double = Date().timeIntervalSince1970
    /// Revisions pushed, over its life.
    public var docsPushed = 0
    /// Revisions pulled, over its life.
    public var docsPulled = 0
    /// Documents that failed, over its life.
    public var docWriteFailures = 0
    /// The last error, for people, and when it happened.
    public var lastError: String?
    /// When `lastError` happened.
    public var lastErrorTime: Double?
    /// Whether the operator paused it.
    public var paused = false
    /// When the last periodic run started (seconds since 1970).
    public var lastRun: Double?
    /// Recent state changes, oldest first.
    public var history: [Event] = []
    /// Recent per-document failures, oldest first.
    public var failures: [Failure] = []

    /// An empty journal.
    public init() {}

    /// Records an event of `type` in the history, and the new state if given.
    public mutating func record(_ type: String, state: State? = nil, reason: String? = nil, at now: Double = Date().timeIntervalSince1970) {
        if let state { self.state = state }
        lastUpdated = now
        history.append(Event(time: now, type: type, reason: reason))
        if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
    }

    mutating func fail(_ documentID: String, _ reason: String, at now: Double = Date().timeIntervalSince1970) {
        docWriteFailures += 1
        failures.append(Failure(documentID: documentID, reason: reason, time: now))
        if failures.count > Self.failureLimit { failures.removeFirst(failures.count - Self.failureLimit) }
        lastError = "\(documentID): \(reason)"
        lastErrorTime = now
    }

    // MARK: JSON

    /// The stored form.
    var json: JSONValue {
        var o: [String: JSONValue] = ["state": .string(state.rawValue), "last_updated": .double(lastUpdated), "start_time": .double(startTime),
                                      "docs_pushed": .int(Int64(docsPushed)), "docs_pulled": .int(Int64(docsPulled)),
                                      "doc_write_failures": .int(Int64(docWriteFailures)), "paused": .bool(paused)]
        if let lastError { o["error"] = .string(lastError) }
        if let lastErrorTime { o["error_time"] = .double(lastErrorTime) }
        if let lastRun { o["last_run"] = .double(lastRun) }
        o["history"] = .array(history.map { e in
            var h: [String: JSONValue] = ["time": .double(e.time), "type": .string(e.type)]
            if let r = e.reason { h["reason"] = .string(r) }
            return .object(h)
        })
        o["failures"] = .array(failures.map { .object(["doc_id": .string($0.documentID), "reason": .string($0.reason), "time": .double($0.time)]) })
        return .object(o)
    }

    /// Reads the stored form; what is missing or malformed keeps its default (a journal is
    /// a record, not an instruction: a damaged one must not stop a replication).
    init(json: JSONValue) {
        guard let o = json.objectValue else { return }
        state = o["state"]?.stringValue.flatMap(State.init(rawValue:)) ?? .initializing
        lastUpdated = o["last_updated"]?.doubleValue ?? lastUpdated
        startTime = o["start_time"]?.doubleValue ?? startTime
        docsPushed = Int(o["docs_pushed"]?.intValue ?? 0)
        docsPulled = Int(o["docs_pulled"]?.intValue ?? 0)
        docWriteFailures = Int(o["doc_write_failures"]?.intValue ?? 0)
        lastError = o["error"]?.stringValue
        lastErrorTime = o["error_time"]?.doubleValue
        paused = o["paused"]?.boolValue ?? false
        lastRun = o["last_run"]?.doubleValue
        history = (o["history"]?.arrayValue ?? []).compactMap { v in
            guard let h = v.objectValue, let t = h["time"]?.doubleValue, let type = h["type"]?.stringValue else { return nil }
            return Event(time: t, type: type, reason: h["reason"]?.stringValue)
        }
        failures = (o["failures"]?.arrayValue ?? []).compactMap { v in
            guard let f = v.objectValue, let id = f["doc_id"]?.stringValue, let r = f["reason"]?.stringValue, let t = f["time"]?.doubleValue else { return nil }
            return Failure(documentID: id, reason: r, time: t)
        }
    }

    /// ISO 8601 in UTC, as CouchDB writes times.
    static func iso(_ t: Double) -> String {
        Date(timeIntervalSince1970: t).formatted(.iso8601)
    }
}
