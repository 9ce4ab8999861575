import COpenSSL
import FerryBLIP
import FerryStore
import FoundationEssentials
import Synchronization

/// Where a replication stands, kept on both sides (Protocol/replication.md, "Checkpoints"): locally in a local
/// document, and on the peer with `setCheckpoint`, under an ID derived from the local database
/// UUID, the peer's URL and the filters, so that a different replication never reuses it.
///
/// `local` is the highest local sequence whose changes were all pushed (or judged); `remote`
/// is the peer's sequence up to which everything pulled is stored. The local copy is written
/// in the same transaction as the pulled revisions it covers, so it is never ahead of the data.
///
/// The peer's copy tells whether the peer still has what we gave it. A second local document
/// keeps the revision of the peer's copy we last saved (`checkpoint-peer/<ID>`): a peer with no
/// copy (new, or its database was deleted) or with an older revision of it (restored from a
/// backup) has lost state, and the replication starts from what the peer's copy says (nothing, for a
/// missing one) and forgets which revisions it had acknowledged (`Database.forgetRemote`) —
/// otherwise the pusher would never offer those again (LiteCore resets on such a mismatch too).
final class Checkpointer: Sendable {
    /// The checkpoint's body.
    struct Value: Sendable, Equatable {
        var local: Int64 = 0
        var remote: JSONValue = .null

        /// What the peer keeps.
        var json: [String: JSONValue] { ["local": .int(local), "remote": remote] }

        init() {}
        init(_ props: [String: JSONValue]) {
            local = props["local"]?.intValue ?? 0
            remote = props["remote"] ?? .null
        }
    }

    /// How a session starts, and why.
    enum Start: Equatable {
        /// From the local checkpoint: the peer's copy is the one we saved last, or newer.
        case resumed
        /// From scratch: asked for (`resetCheckpoint`), or the peer has no copy (new to us, or
        /// its database was replaced); acknowledged revisions forgotten.
        case fromScratch
        /// From the peer's copy, older than the one we saved last (restored from a backup);
        /// acknowledged revisions forgotten.
        case fromPeersCopy
    }

    /// The checkpoint ID (`client` on the wire).
    let id: String
    let database: Database
    /// `value` holds only committed progress; `pulling` is pulled progress written by a
    /// transaction not known to have committed yet (see `recordPulled`).
    private let state = Mutex<(value: Value, remoteRev: String?, savedToPeer: Value?, pulling: JSONValue?)>((Value(), nil, nil, nil))
    /// The remote-revision bookkeeping's name for the peer (its URL).
    let remote: String
    /// How the last `start` began.
    private let lastStart = Mutex<Start?>(nil)
    /// When pushed progress was last written, and whether some is not written yet.
    private let pushSaves = Mutex<(last: ContinuousClock.Instant?, dirty: Bool)>((nil, false))
    private let peerSave = Mutex<Task<Void, Never>?>(nil)
    /// The least time between two saves of pushed progress before the push has caught up.
    private let pushSaveInterval: Duration

    var localDocumentID: String { "checkpoint/" + id }
    var value: Value { state.withLock { $0.value } }

    init(configuration c: ReplicatorConfiguration, pushSaveInterval: Duration = ReplicatorTuning.pushSaveInterval) {
        self.pushSaveInterval = pushSaveInterval
        var key = Array(c.database.uuid.uuidString.utf8)
        key += Array("\n\(c.target)\n\(c.pullFilter ?? "")\n".utf8)
        key += c.pullFilterParameters.sorted { $0.key < $1.key }.flatMap { Array("\($0.key)=\($0.value)\n".utf8) }
        key += (c.documentIDs ?? []).sorted().flatMap { Array("\($0)\n".utf8) }
        key += Array(CanonicalJSON.encode(.object(c.pushFilterParameters)))
        // A selector pull is another replication (added only when set: IDs without one stay).
        if let selector = c.selector { key += Array("\nselector=".utf8) + CanonicalJSON.encode(selector) }
        id = "cp-" + Data(Checkpointer.sha1(key)).base64EncodedString()
        database = c.database
        remote = c.target
    }

    /// How the last `start` began (nil before one).
    var started: Start? { lastStart.withLock { $0 } }

    /// Where the revision of the peer's copy we last saved is kept: apart from the value, so
    /// its writes never race the pulled revisions' transactions that write the value.
    var peerRevisionDocumentID: String { "checkpoint-peer/" + id }

    static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { b in _ = SHA1(b.baseAddress, b.count, &out) }
        return out
    }

    /// Reads both copies and decides where to start (`Start`): the local copy, unless a reset
    /// was asked for or the peer lost state (see the type's comment).
    func start(connection: BLIPConnection, reset: Bool) async throws(ReplicationError) -> Value {
        let local: Value
        let lastPeerRev: String?
        do {
            local = try database.localDocument(localDocumentID).map { Value($0.properties) } ?? Value()
            lastPeerRev = try database.localDocument(peerRevisionDocumentID)?.properties["rev"]?.stringValue
        } catch { throw .store(error) }
        var peer: (rev: String, value: Value)?
        do {
            let reply = try await connection.send(.request(profile: ReplicationProtocol.Profile.getCheckpoint, properties: [(ReplicationProtocol.Property.client, id)]))
            if let rev = reply.properties[ReplicationProtocol.Property.rev],
               case .object(let o)? = try? JSONParser.parse(reply.body, sizeLimit: 1 << 20) {
                peer = (rev, Value(o))
            }
        } catch .errorResponse(_, 404, _) {
            peer = nil
        } catch {
            throw ReplicationError(error)
        }
        let how: Start
        let start: Value
        if reset || peer == nil {
            (how, start) = (.fromScratch, Value())
        } else if let peer, let lastPeerRev, Self.isOlder(peer.rev, than: lastPeerRev) {
            (how, start) = (.fromPeersCopy, peer.value)
        } else {
            (how, start) = (.resumed, local)
        }
        if how != .resumed {
            do { try database.forgetRemote(remote) } catch { throw .store(error) }
        }
        state.withLock { $0 = (start, peer?.rev, peer?.value, nil) }
        lastStart.withLock { $0 = how }
        return start
    }

    /// Whether the peer's copy at revision `rev` is older than the one we last saved (`known`).
    /// Local-document revisions are `0-N`, N counting the copy's saves: a smaller N is a copy
    /// from before (a restored backup); a larger one is a save whose answer we never got (the
    /// connection broke first), which is fine. Revisions of another shape only compare equal.
    static func isOlder(_ rev: String, than known: String) -> Bool {
        func saves(_ r: String) -> Int? { r.split(separator: "-", maxSplits: 1).last.flatMap { Int($0) } }
        guard let n = saves(rev), let k = saves(known) else { return rev != known }
        return n < k
    }

    /// Records pulled progress; `batch` is the transaction that stored the revisions it covers.
    /// The progress counts (for the peer's copy, and other writes of the local one) only once
    /// `pulledCommitted()` says that transaction committed: a copy written before could claim
    /// revisions a failed commit never stored.
    func recordPulled(upTo remote: JSONValue, in batch: Batch) throws(StoreError) {
        let v = state.withLock { s -> Value in
            s.pulling = remote
            var v = s.value
            v.remote = remote
            return v
        }
        try batch.putLocalDocument(localDocumentID, properties: v.json)
    }

    /// The transaction of the last `recordPulled` committed.
    func pulledCommitted() {
        state.withLock { s in
            if let p = s.pulling { s.value.remote = p }
            s.pulling = nil
        }
    }

    /// Records pushed progress: in memory at once, in the local document (returning true: the
    /// caller then saves it to the peer) only when `settled` (the push caught up) or a second
    /// has passed since the last save. Each save is a transaction here and on the peer, which
    /// per batch cost a few percent of both sides' CPU; progress not yet saved when a push
    /// dies is only proposed again, and the peer answers that it has those revisions.
    func recordPushed(upTo local: Int64, settled: Bool) async throws(StoreError) -> Bool {
        state.withLock { s in s.value.local = max(s.value.local, local) }
        let now = ContinuousClock.now
        let due = pushSaves.withLock { p -> Bool in
            let due = settled || p.last.map { now - $0 >= pushSaveInterval } ?? true
            p.dirty = !due
            if due { p.last = now }
            return due
        }
        guard due else { return false }
        try await savePushed()
        return true
    }

    /// Writes pushed progress not yet written (when a session ends).
    func flushPushed() async throws(StoreError) {
        guard pushSaves.withLock({ p -> Bool in defer { p.dirty = false }; return p.dirty }) else { return }
        try await savePushed()
    }

    private func savePushed() async throws(StoreError) {
        let id = localDocumentID, properties = value.json
        _ = try await database.write { (d) throws(StoreError) in try d.putLocalDocument(id, properties: properties) }
    }

    /// Sends the current value to the peer (`setCheckpoint`), one save at a time; a 409 (the
    /// peer's copy moved) re-reads its revision and retries once. Waits for the save.
    func saveToPeer(connection: BLIPConnection) async {
        let previous = peerSave.withLock { $0 }
        let task = Task {
            await previous?.value
            let (value, rev, saved) = state.withLock { ($0.value, $0.remoteRev, $0.savedToPeer) }
            guard value != saved else { return }
            for _ in 0..<2 {
                var props: BLIPProperties = [(ReplicationProtocol.Property.client, id)]
                if let rev = state.withLock({ $0.remoteRev }) ?? rev { props = [(ReplicationProtocol.Property.client, id), (ReplicationProtocol.Property.rev, rev)] }
                do throws(BLIPError) {
                    let reply = try await connection.send(.request(profile: ReplicationProtocol.Profile.setCheckpoint, properties: props,
                                                                   body: CanonicalJSON.encode(.object(value.json))))
                    let rev = reply.properties[ReplicationProtocol.Property.rev]
                    state.withLock { $0.remoteRev = rev; $0.savedToPeer = value }
                    // Remembered, so the next start can tell this copy from an older one a
                    // restored peer would show.
                    if let rev { let id = peerRevisionDocumentID; _ = try? await database.write { (d) throws(StoreError) in try d.putLocalDocument(id, properties: ["rev": .string(rev)]) } }
                    return
                } catch {
                    guard case .errorResponse(_, let code, _) = error, code == 409 || code == 404 else { return }
                    let reply = try? await connection.send(.request(profile: ReplicationProtocol.Profile.getCheckpoint, properties: [(ReplicationProtocol.Property.client, id)]))
                    state.withLock { $0.remoteRev = reply?.properties[ReplicationProtocol.Property.rev] }
                }
            }
        }
        peerSave.withLock { $0 = task }
        await task.value
    }
}
