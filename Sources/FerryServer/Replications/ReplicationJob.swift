import FerryStore
import Foundation

/// The operator's views of a managed replication (Protocol/replicator.md): CouchDB's
/// `_scheduler/jobs` and `_scheduler/docs` entries, and the `_replicator` document.
enum ReplicationJob {
    /// A `_scheduler/jobs` entry: CouchDB's fields (`id`, `doc_id`, `database`, `source`,
    /// `target`, `start_time`, `info`, `history` newest first), plus Ferry's `state`,
    /// `direction`, `continuous`, `schedule` and per-document `info.failures`.
    static func job(_ e: ReplicationStore.Entry, session: ManagedReplication.Session?) -> JSONValue {
        let s = e.spec, j = e.journal
        var o = common(e)
        o["doc_id"] = .string(s.id)
        o["database"] = .string(s.database)
        o["direction"] = .string(s.direction.rawValue)
        o["continuous"] = .bool(s.continuous)
        o["state"] = .string(j.state.rawValue)
        o["transient"] = .bool(e.transient)
        o["history"] = .array(j.history.reversed().map { h in
            var x: [String: JSONValue] = ["timestamp": .string(ReplicationJournal.iso(h.time)), "type": .string(h.type)]
            if let r = h.reason { x["reason"] = .string(r) }
            return .object(x)
        })
        var info = infoJSON(e)
        if let session {
            let completed = session.progress?.completed ?? 0, total = session.progress?.total ?? 0
            info["progress"] = .object(["completed": .int(Int64(completed)), "total": .int(Int64(total))])
            info["changes_pending"] = .int(Int64(max(0, total - completed)))
            info["activity"] = .string(session.activity.rawValue)
            info["session"] = .object(["started": .string(ReplicationJournal.iso(session.started)), "docs_pushed": .int(Int64(session.pushed)),
                                       "docs_pulled": .int(Int64(session.pulled))])
        }
        info["failures"] = .array(j.failures.reversed().map {
            .object(["doc_id": .string($0.documentID), "reason": .string($0.reason), "time": .string(ReplicationJournal.iso($0.time))])
        })
        o["info"] = .object(info)
        if let sch = s.schedule {
            var x: [String: JSONValue] = ["every": .double(sch.every), "budget": .double(sch.budget)]
            if let b = sch.backgroundEvery { x["background_every"] = .double(b) }
            if let last = j.lastRun { x["last_run"] = .string(ReplicationJournal.iso(last)) }
            o["schedule"] = .object(x)
        } else {
            o["schedule"] = .null
        }
        return .object(o)
    }

    /// A `_scheduler/docs` entry (CouchDB's shape).
    static func doc(_ e: ReplicationStore.Entry) -> JSONValue {
        var o = common(e)
        o["database"] = "_replicator"
        o["doc_id"] = .string(e.spec.id)
        o["state"] = .string(e.journal.state.rawValue)
        o["info"] = .object(infoJSON(e))
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
        o["_replication_stats"] = .object(infoJSON(e))
        return .object(o)
    }

    private static func common(_ e: ReplicationStore.Entry) -> [String: JSONValue] {
        let s = e.spec
        let (source, target) = s.direction == .pull ? (s.peer, s.database) : (s.database, s.peer)
        return ["id": .string(s.id), "source": .string(source), "target": .string(target), "node": "ferry",
                "start_time": .string(ReplicationJournal.iso(e.journal.startTime)),
                "last_updated": .string(ReplicationJournal.iso(e.journal.lastUpdated)), "user": .null]
    }

    private static func infoJSON(_ e: ReplicationStore.Entry) -> [String: JSONValue] {
        let j = e.journal
        let moved = Int64(j.docsPushed + j.docsPulled)
        var o: [String: JSONValue] = ["docs_read": .int(moved), "docs_written": .int(moved), "docs_pushed": .int(Int64(j.docsPushed)),
                                      "docs_pulled": .int(Int64(j.docsPulled)), "doc_write_failures": .int(Int64(j.docWriteFailures)),
                                      "error": j.lastError.map { .string($0) } ?? .null,
                                      "error_time": j.lastErrorTime.map { .string(ReplicationJournal.iso($0)) } ?? .null]
        o["paused"] = .bool(j.paused)
        return o
    }
}

extension ReplicationStore.Entry {
    /// The entry as a `_scheduler/jobs` entry, without live session counters (for tools that
    /// read the replications file of a daemon that is not running).
    public var jobJSON: JSONValue { ReplicationJob.job(self, session: nil) }
}
