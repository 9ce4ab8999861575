import FerryStore
import FoundationEssentials

/// The operator's views of a managed replication (Protocol/replicator.md): CouchDB's
/// `_scheduler/jobs` and `_scheduler/docs` entries, and the `_replicator` document.
enum ReplicationJob {
    /// A `_scheduler/jobs` entry (`SchedulerJob` is its shape); `session`, the live counters
    /// of a running job, adds progress, activity and `info.session`.
    static func job(_ e: ReplicationStore.Entry, session: ManagedReplication.Session?) -> SchedulerJob {
        let s = e.spec, j = e.journal
        let (source, target) = s.direction == .pull ? (s.peer, s.database) : (s.database, s.peer)
        var info = SchedulerJob.Info()
        let moved = Int64(j.docsPushed + j.docsPulled)
        (info.docsRead, info.docsWritten, info.docsPushed, info.docsPulled) = (moved, moved, Int64(j.docsPushed), Int64(j.docsPulled))
        info.docWriteFailures = Int64(j.docWriteFailures)
        info.error = j.lastError
        info.errorTime = j.lastErrorTime.map(ReplicationJournal.iso)
        info.paused = j.paused
        if let session {
            let completed = Int64(session.progress?.completed ?? 0), total = Int64(session.progress?.total ?? 0)
            info.progress = SchedulerJob.Progress(completed: completed, total: total)
            info.changesPending = max(0, total - completed)
            info.activity = session.activity.rawValue
            info.session = SchedulerJob.Session(started: ReplicationJournal.iso(session.started), docsPushed: Int64(session.pushed),
                                                docsPulled: Int64(session.pulled))
        }
        info.failures = j.failures.reversed().map {
            SchedulerJob.Failure(documentID: $0.documentID, reason: $0.reason, time: ReplicationJournal.iso($0.time))
        }
        let schedule = s.schedule.map {
            SchedulerJob.Schedule(every: $0.every, budget: $0.budget, backgroundEvery: $0.backgroundEvery,
                                  lastRun: j.lastRun.map(ReplicationJournal.iso))
        }
        return SchedulerJob(id: s.id, documentID: s.id, database: s.database, source: source, target: target,
                            direction: s.direction.rawValue, continuous: s.continuous, state: j.state.rawValue,
                            transient: e.transient, startTime: ReplicationJournal.iso(j.startTime),
                            lastUpdated: ReplicationJournal.iso(j.lastUpdated), info: info,
                            history: j.history.reversed().map { SchedulerJob.Event(timestamp: ReplicationJournal.iso($0.time), type: $0.type, reason: $0.reason) },
                            schedule: schedule)
    }

    /// A `_scheduler/docs` entry (CouchDB's shape): the job's common members, with the
    /// `_replicator` database and its counters without per-document failures.
    static func doc(_ e: ReplicationStore.Entry) -> JSONValue {
        let job = Self.job(e, session: nil)
        let all = job.json.objectValue ?? [:]
        var o = all.filter { ["id", "source", "target", "node", "start_time", "last_updated", "user", "doc_id", "state"].contains($0.key) }
        o["database"] = "_replicator"
        o["info"] = stats(job)
        o["error_count"] = .int(Int64(e.journal.history.filter { $0.type == "crashed" }.count))
        return .object(o)
    }

    /// The `_replicator` document: the spec (password hidden) with CouchDB's state fields.
    static func document(_ e: ReplicationStore.Entry) -> JSONValue {
        var o = e.spec.publicJSON
        o["_id"] = .string(e.spec.id)
        o["_rev"] = .string(e.revision)
        o["_replication_state"] = .string(e.journal.state.rawValue)
        o["_replication_state_time"] = .string(ReplicationJournal.iso(e.journal.lastUpdated))
        if e.journal.state == .failed || e.journal.state == .crashing, let r = e.journal.history.last?.reason ?? e.journal.lastError {
            o["_replication_state_reason"] = .string(r)
        }
        o["_replication_stats"] = stats(Self.job(e, session: nil))
        return .object(o)
    }

    /// A job's counters without its per-document failures, as `_scheduler/docs` and
    /// `_replication_stats` show them.
    private static func stats(_ job: SchedulerJob) -> JSONValue {
        var info = job.info
        info.failures = nil
        return info.json
    }
}

extension ReplicationStore.Entry {
    /// The entry as a `_scheduler/jobs` entry, without live session counters (for tools that
    /// read the replications file of a daemon that is not running).
    public var job: SchedulerJob { ReplicationJob.job(self, session: nil) }
}
