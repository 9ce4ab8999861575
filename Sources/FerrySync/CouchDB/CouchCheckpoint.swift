import FerryHTTP
import FerryStore
import FoundationEssentials
import Synchronization

/// One direction's checkpoint in CouchDB's shape (Protocol/replication-http.md,
/// "Checkpoints"; CouchDB's replication protocol, "Retrieve Replication Logs"): a `_local`
/// document with the same ID on the source and on the target, holding `session_id`,
/// `source_last_seq` and a `history` of sessions. A replication resumes from
/// `source_last_seq` when both copies carry the same `session_id`, else from the
/// `recorded_seq` of the newest session both histories share, else from the start — so a
/// side that lost its copy (or was restored from a backup) makes the replication compare
/// again rather than skip.
final class CouchCheckpoint: Sendable {
    /// Where the two copies live.
    enum Side: Sendable {
        /// The local database, as a local document (served as `_local/<id>` by `ferry serve`).
        case local(Database)
        /// The CouchDB database.
        case remote(CouchRemote)
    }

    /// The replication ID (CouchDB's are 32 hex digits; so are these).
    let id: String
    private let source: Side
    private let target: Side
    private let sessionID = UUID().uuidString.replacing("-", with: "").lowercased()
    private let startTime = HTTPDate.now()
    /// The copies' bodies as last read or written, and the remote copy's `_rev`.
    private let state = Mutex<(source: [String: JSONValue]?, target: [String: JSONValue]?, remoteRev: String?,
                               startSeq: JSONValue)>((nil, nil, nil, .int(0)))

    /// The checkpoint of the replication from `source` to `target` named by `key` (everything
    /// that makes it a different replication: the local database's UUID, the remote URL, the
    /// direction, the filters).
    init(key: String, source: Side, target: Side) {
        id = Self.md5Hex(Array(key.utf8))
        self.source = source
        self.target = target
    }

    /// Seconds between writes of the source's copy (the target's is written after every batch:
    /// it is what says how far the target has the data).
    static let sourceInterval = 5.0
    /// When the source's copy was last written, and whether it is behind the target's.
    private let sourceWrites = Mutex<(last: ContinuousClock.Instant?, behind: Bool)>((nil, false))

    /// Reads both copies and returns the source sequence to resume from (`0` for the start).
    func start(reset: Bool) async throws(ReplicationError) -> JSONValue {
        let s = try await read(source)
        let t = try await read(target)
        let since: JSONValue
        if reset {
            since = .int(0)
        } else if let s, let t, let session = s["session_id"], session == t["session_id"], let seq = t["source_last_seq"] {
            // The same session on both: the target's copy, written after every batch, says how
            // far the target has the data (the source's may lag by `sourceInterval`).
            since = seq
        } else if let s, let t {
            since = Self.commonAncestor(s["history"]?.arrayValue ?? [], t["history"]?.arrayValue ?? []) ?? .int(0)
        } else {
            since = .int(0)
        }
        state.withLock { $0.source = s; $0.target = t; $0.startSeq = since }
        return since
    }

    /// Records that everything up to `seq` of the source is on the target: the target's copy
    /// every time, the source's (CouchDB's order: target, then source) at most every
    /// `sourceInterval` seconds unless `final`, both with this session at the head of the
    /// history. `stats` are this session's counters.
    func save(seq: JSONValue, stats: [String: Int], final: Bool = false) async throws(ReplicationError) {
        let now = HTTPDate.now()
        let (old, start) = state.withLock { ($0.target ?? $0.source, $0.startSeq) }
        var entry: [String: JSONValue] = ["session_id": .string(sessionID), "start_time": .string(startTime), "end_time": .string(now),
                                          "start_last_seq": start, "end_last_seq": seq, "recorded_seq": seq]
        for (k, v) in stats { entry[k] = .int(Int64(v)) }
        var history = (old?["history"]?.arrayValue ?? []).filter { $0.objectValue?["session_id"]?.stringValue != sessionID }
        history.insert(.object(entry), at: 0)
        let body: [String: JSONValue] = ["session_id": .string(sessionID), "source_last_seq": seq, "replication_id_version": 4,
                                         "history": .array(Array(history.prefix(50)))]
        try await write(body, to: target)
        state.withLock { $0.target = body }
        let due = sourceWrites.withLock { w -> Bool in
            let due = final || w.last.map { ContinuousClock.now - $0 >= .seconds(Self.sourceInterval) } ?? true
            w.behind = !due
            if due { w.last = .now }
            return due
        }
        if due {
            try await write(body, to: source)
            state.withLock { $0.source = body }
        }
    }

    /// Writes the source's copy if it is behind the target's (at the end of a pass).
    func flush() async throws(ReplicationError) {
        guard sourceWrites.withLock({ $0.behind }), let body = state.withLock({ $0.target }) else { return }
        try await write(body, to: source)
        state.withLock { $0.source = body }
        sourceWrites.withLock { $0 = (.now, false) }
    }

    private func read(_ side: Side) async throws(ReplicationError) -> [String: JSONValue]? {
        switch side {
        case .local(let db):
            do { return try db.localDocument(id)?.properties } catch { throw .store(error) }
        case .remote(let remote):
            let a = try await remote.request("GET", "_local/" + id)
            if a.status == 404 { return nil }
            guard a.status == 200, var o = a.json.objectValue else { throw CouchRemote.failure(a, "GET _local/\(id)") }
            let rev = o.removeValue(forKey: "_rev")?.stringValue
            o["_id"] = nil
            state.withLock { $0.remoteRev = rev }
            return o
        }
    }

    private func write(_ body: [String: JSONValue], to side: Side) async throws(ReplicationError) {
        switch side {
        case .local(let db):
            let id = self.id
            do { _ = try await db.write { (d) throws(StoreError) in try d.putLocalDocument(id, properties: body) } } catch { throw .store(error) }
        case .remote(let remote):
            var doc = body
            if let rev = state.withLock({ $0.remoteRev }) { doc["_rev"] = .string(rev) }
            var a = try await remote.request("PUT", "_local/" + id, json: .object(doc))
            if a.status == 409 {
                // Someone else wrote it (another replicator of the same pair): take its revision.
                _ = try await read(side)
                if let rev = state.withLock({ $0.remoteRev }) { doc["_rev"] = .string(rev) }
                a = try await remote.request("PUT", "_local/" + id, json: .object(doc))
            }
            guard (200..<300).contains(a.status) else { throw CouchRemote.failure(a, "PUT _local/\(id)") }
            state.withLock { $0.remoteRev = a.json.objectValue?["rev"]?.stringValue }
        }
    }

    /// The `recorded_seq` of the newest session of `source`'s history that `target`'s also
    /// has (CouchDB's `compare_replication_logs`).
    static func commonAncestor(_ source: [JSONValue], _ target: [JSONValue]) -> JSONValue? {
        let targetSessions = Set(target.compactMap { $0.objectValue?["session_id"]?.stringValue })
        for entry in source {
            guard let o = entry.objectValue, let session = o["session_id"]?.stringValue, targetSessions.contains(session) else { continue }
            return o["recorded_seq"]
        }
        return nil
    }

    /// MD5 of `bytes` as 32 lowercase hex digits (the form of CouchDB's replication IDs).
    static func md5Hex(_ bytes: [UInt8]) -> String {
        let text = AttachmentMD5.digest(bytes)  // "md5-<base64>"
        guard let raw = Data(base64Encoded: String(text.dropFirst(4))) else { return "" }
        return Hex.encode(raw)
    }
}

