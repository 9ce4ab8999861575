import COpenSSL
import FerryBLIP
import FerryStore
import Foundation
import Synchronization

/// Where a replication stands, kept on both sides (reference §3.3): locally in a local
/// document, and on the peer with `setCheckpoint`, under an ID derived from the local database
/// UUID, the peer's URL and the filters, so that a different replication never reuses it.
///
/// `local` is the highest local sequence whose changes were all pushed (or judged); `remote`
/// is the peer's sequence up to which everything pulled is stored. The local copy is written
/// in the same transaction as the pulled revisions it covers, so it is never ahead of the data;
/// the peer's copy only tells us whether the peer still knows us (a peer whose database was
/// replaced has no checkpoint, and the replication starts over).
final class Checkpointer: Sendable {
    /// The checkpoint's body.
    struct Value: Sendable, Equatable {
        var local: Int64 = 0
        var remote: JSONValue = .null

        var json: [String: JSONValue] { ["local": .int(local), "remote": remote] }

        init() {}
        init(_ props: [String: JSONValue]) {
            local = props["local"]?.intValue ?? 0
            remote = props["remote"] ?? .null
        }
    }

    /// The checkpoint ID (`client` on the wire).
    let id: String
    let database: Database
    private let state = Mutex<(value: Value, remoteRev: String?, savedToPeer: Value?)>((Value(), nil, nil))
    /// When pushed progress was last written, and whether some is not written yet.
    private let pushSaves = Mutex<(last: ContinuousClock.Instant?, dirty: Bool)>((nil, false))
    /// The shortest time between two saves of pushed progress while a push is under way.
    static let pushSaveInterval = Duration.seconds(1)
    private let peerSave = Mutex<Task<Void, Never>?>(nil)

    var localDocumentID: String { "checkpoint/" + id }
    var value: Value { state.withLock { $0.value } }

    init(configuration c: ReplicatorConfiguration) {
        var key = Array(c.database.uuid.uuidString.utf8)
        key += Array("\n\(c.target)\n\(c.pullFilter ?? "")\n".utf8)
        key += c.pullFilterParameters.sorted { $0.key < $1.key }.flatMap { Array("\($0.key)=\($0.value)\n".utf8) }
        key += (c.documentIDs ?? []).sorted().flatMap { Array("\($0)\n".utf8) }
        key += Array(CanonicalJSON.encode(.object(c.pushFilterParameters)))
        id = "cp-" + Data(Checkpointer.sha1(key)).base64EncodedString()
        database = c.database
    }

    static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { b in _ = SHA1(b.baseAddress, b.count, &out) }
        return out
    }

    /// Reads both copies and decides where to start: the local copy, unless it is missing, a
    /// reset was asked for, or the peer has no checkpoint for us (then from scratch).
    func start(connection: BLIPConnection, reset: Bool) async throws(ReplicationError) -> Value {
        let local: Value
        do { local = try database.localDocument(localDocumentID).map { Value($0.properties) } ?? Value() }
        catch { throw .store(error) }
        var peer: (rev: String, value: Value)?
        do {
            let reply = try await connection.send(.request(profile: "getCheckpoint", properties: [("client", id)]))
            if let rev = reply.properties["rev"],
               case .object(let o)? = try? JSONParser.parse(reply.body, sizeLimit: 1 << 20) {
                peer = (rev, Value(o))
            }
        } catch .errorResponse(_, 404, _) {
            peer = nil
        } catch {
            throw ReplicationError(error)
        }
        let start = (reset || peer == nil) ? Value() : local
        state.withLock { $0 = (start, peer?.rev, peer?.value) }
        return start
    }

    /// Records pulled progress; `batch` is the transaction that stored the revisions it covers.
    func recordPulled(upTo remote: JSONValue, in batch: Batch) throws(StoreError) {
        let v = state.withLock { s -> Value in s.value.remote = remote; return s.value }
        try batch.putLocalDocument(localDocumentID, properties: v.json)
    }

    /// Records pushed progress: in memory at once, in the local document (returning true: the
    /// caller then saves it to the peer) only when `settled` (the push caught up) or a second
    /// has passed since the last save. Each save is a transaction here and on the peer, which
    /// per batch cost a few percent of both sides' CPU; progress not yet saved when a push
    /// dies is only proposed again, and the peer answers that it has those revisions.
    func recordPushed(upTo local: Int64, settled: Bool) throws(StoreError) -> Bool {
        state.withLock { s in s.value.local = max(s.value.local, local) }
        let now = ContinuousClock.now
        let due = pushSaves.withLock { p -> Bool in
            let due = settled || p.last.map { now - $0 >= Self.pushSaveInterval } ?? true
            p.dirty = !due
            if due { p.last = now }
            return due
        }
        guard due else { return false }
        try savePushed()
        return true
    }

    /// Writes pushed progress not yet written (when a session ends).
    func flushPushed() throws(StoreError) {
        guard pushSaves.withLock({ p -> Bool in defer { p.dirty = false }; return p.dirty }) else { return }
        try savePushed()
    }

    private func savePushed() throws(StoreError) {
        try database.putLocalDocument(localDocumentID, properties: value.json)
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
                var props: BLIPProperties = [("client", id)]
                if let rev = state.withLock({ $0.remoteRev }) ?? rev { props = [("client", id), ("rev", rev)] }
                do throws(BLIPError) {
                    let reply = try await connection.send(.request(profile: "setCheckpoint", properties: props,
                                                                   body: CanonicalJSON.encode(.object(value.json))))
                    state.withLock { $0.remoteRev = reply.properties["rev"]; $0.savedToPeer = value }
                    return
                } catch {
                    guard case .errorResponse(_, let code, _) = error, code == 409 || code == 404 else { return }
                    let reply = try? await connection.send(.request(profile: "getCheckpoint", properties: [("client", id)]))
                    state.withLock { $0.remoteRev = reply?.properties["rev"] }
                }
            }
        }
        peerSave.withLock { $0 = task }
        await task.value
    }
}
