import FerryBLIP
import FerryStore
@testable import FerrySync
import FerryWebSocket
import Foundation
import Synchronization
import Testing

/// Checkpoints against peers that forget (wiped, restored from a backup) and peers that list
/// back what they were pushed.
@Suite("Checkpoint recovery")
struct CheckpointRecoveryTests {
    /// A peer that lists back every revision it was pushed (as Sync Gateway does): once they are
    /// all known, the pull's checkpoint still moves past them, so the next pull lists nothing.
    @Test func changesThatAreAllKnownAreCheckpointedPast() async throws {
        let molly = try await Peer.make("molly")
        for i in 0..<100 { try molly.put("doc\(i)", ["i": .int(Int64(i))]) }
        let gateway = try await ListingBackPeer.start()
        try await replicate(molly, with: gateway, .push)
        #expect(gateway.stored.count == 100)

        try await replicate(molly, with: gateway, .pull)
        #expect(gateway.listed == [100], "the first pull lists back all 100 pushed revisions")
        try await replicate(molly, with: gateway, .pull)
        #expect(gateway.listed == [100, 0], "the second pull starts past them")
        #expect(gateway.sinces.last == "100")
        await gateway.stop()
        await molly.stop()
    }

    /// B's database is deleted and B comes back empty at the same URL: the next sync restores
    /// everything on it, with or without a reset, although A remembers B acknowledging it all.
    @Test(arguments: [false, true])
    func aWipedPeerGetsEverythingAgain(reset: Bool) async throws {
        let molly = try await Peer.make("molly")
        for i in 0..<1000 { try molly.put("doc\(i)", ["i": .int(Int64(i))]) }
        let first = try await Peer.make("naomi", serving: true)
        try await replicate(molly, with: first)
        #expect(try first.db.documentCount() == 1000)
        let port = try #require(first.listener?.port)
        await first.stop()

        let wiped = try await Peer.make("naomi")
        let listener = try await Self.serve(wiped, as: "naomi", port: port)
        let r = try await replicate(molly, with: wiped) { c in
            c.target = listener.url(for: "naomi")
            c.resetCheckpoint = reset
        }
        #expect(try wiped.db.documentCount() == 1000)
        #expect(r.status.lastError == nil)
        await listener.stop()
        await molly.stop(); await wiped.stop()
    }

    /// B is restored from a backup taken half-way: what A pushed after the backup reaches B
    /// again, although A remembers B acknowledging it.
    @Test func aPeerRestoredFromAnOlderBackupGetsWhatItLost() async throws {
        let molly = try await Peer.make("molly")
        let naomiDir = TempDir()
        let naomiPath = naomiDir.path("naomi.ferry")
        var naomi = try Database.open(at: naomiPath)
        for i in 0..<500 { try molly.put("doc\(i)", ["i": .int(Int64(i))]) }
        var listener = try await SyncListener.start(serving: ["naomi": naomi], configuration: Self.listenerConfig(port: 0))
        let port = listener.port
        let url = listener.url(for: "naomi")
        try await Self.sync(molly, url)
        await listener.stop()
        naomi.close()
        // The backup: the closed file (its WAL folded in on close).
        try FileManager.default.copyItem(atPath: naomiPath, toPath: naomiPath + ".backup")

        naomi = try Database.open(at: naomiPath)
        listener = try await SyncListener.start(serving: ["naomi": naomi], configuration: Self.listenerConfig(port: port))
        for i in 500..<1000 { try molly.put("doc\(i)", ["i": .int(Int64(i))]) }
        try await Self.sync(molly, url)
        #expect(try naomi.documentCount() == 1000)
        await listener.stop()
        naomi.close()

        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: naomiPath + suffix) }
        try FileManager.default.moveItem(atPath: naomiPath + ".backup", toPath: naomiPath)
        naomi = try Database.open(at: naomiPath)
        #expect(try naomi.documentCount() == 500)
        listener = try await SyncListener.start(serving: ["naomi": naomi], configuration: Self.listenerConfig(port: port))
        try await Self.sync(molly, url)
        #expect(try naomi.documentCount() == 1000)
        await listener.stop()
        naomi.close()
        await molly.stop()
    }

    /// The checkpointer tells the three starts apart; a copy on the peer newer than the one we
    /// know of (a save whose answer was lost) is no reason to start over.
    @Test func theStartSaysWhyItBeganWhereItDid() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        try molly.put("a", ["v": 1])
        let checkpointer = Checkpointer(configuration: ReplicatorConfiguration(database: molly.db, target: naomi.url))
        for expected in [Checkpointer.Start.fromScratch, .resumed] {
            let conn = try await BLIPConnection.connect(to: naomi.url + "/_blipsync", app: SyncListener.app)
            _ = try await checkpointer.start(connection: conn, reset: false)
            #expect(checkpointer.started == expected)
            try await checkpointer.flushPushed()
            _ = try await checkpointer.recordPushed(upTo: 1, settled: true)
            await checkpointer.saveToPeer(connection: conn)
            await conn.close()
        }
        // The peer shows an older copy than the last one we saved (as a restored backup would):
        // here, we remember saves it no longer has.
        try naomi.db.putLocalDocument("peerCheckpoint/" + checkpointer.id, properties: ["local": .int(0), "remote": .null])
        try molly.db.putLocalDocument(checkpointer.peerRevisionDocumentID, properties: ["rev": "0-99"])
        let conn = try await BLIPConnection.connect(to: naomi.url + "/_blipsync", app: SyncListener.app)
        let start = try await checkpointer.start(connection: conn, reset: false)
        #expect(checkpointer.started == .fromPeersCopy)
        #expect(start.local == 0)
        await conn.close()
        #expect(!Checkpointer.isOlder("0-5", than: "0-4"), "a save whose answer was lost")
        #expect(Checkpointer.isOlder("0-3", than: "0-4"))
        #expect(!Checkpointer.isOlder("abc", than: "abc") && Checkpointer.isOlder("abc", than: "abd"))
        await molly.stop(); await naomi.stop()
    }

    static func listenerConfig(port: Int) -> SyncListener.Configuration {
        var c = SyncListener.Configuration()
        c.port = port
        return c
    }

    static func serve(_ peer: Peer, as name: String, port: Int) async throws -> SyncListener {
        try await SyncListener.start(serving: [name: peer.db], configuration: listenerConfig(port: port))
    }

    static func sync(_ peer: Peer, _ url: String) async throws {
        let r = Replicator(configuration: ReplicatorConfiguration(database: peer.db, target: url))
        try await r.run()
    }
}

/// A scripted passive peer at `/gateway` that keeps checkpoints and pushed revisions in memory
/// and, asked for changes, lists back everything it was pushed (sequence = arrival order).
final class ListingBackPeer: Sendable {
    private struct State {
        var checkpoints: [String: (rev: Int, body: [UInt8])] = [:]
        var stored: [(id: String, rev: String)] = []
        var listed: [Int] = []
        var sinces: [String] = []
    }
    private let state = Mutex(State())
    private let listener = Mutex<WebSocketListener?>(nil)

    var stored: [(id: String, rev: String)] { state.withLock { $0.stored } }
    /// How many entries each `subChanges` was listed.
    var listed: [Int] { state.withLock { $0.listed } }
    /// The `since` of each `subChanges`.
    var sinces: [String] { state.withLock { $0.sinces } }

    static func start() async throws -> ListingBackPeer {
        let peer = ListingBackPeer()
        let l = try await BLIPConnection.listen(path: "/gateway/_blipsync", app: SyncListener.app) { conn in
            peer.register(conn)
        }
        peer.listener.withLock { $0 = l }
        return peer
    }

    func stop() async { await listener.withLock { $0 }?.close() }

    private func register(_ conn: BLIPConnection) {
        conn.register(profile: "getCheckpoint") { [self] req in
            let client = req.message.properties["client"] ?? ""
            if let cp = state.withLock({ $0.checkpoints[client] }) {
                req.respond(properties: [("rev", "0-\(cp.rev)")], body: cp.body)
            } else {
                req.respondError(domain: "HTTP", code: 404, message: "missing")
            }
        }
        conn.register(profile: "setCheckpoint") { [self] req in
            let client = req.message.properties["client"] ?? ""
            let rev = state.withLock { s -> Int in
                let next = (s.checkpoints[client]?.rev ?? 0) + 1
                s.checkpoints[client] = (next, req.message.body)
                return next
            }
            req.respond(properties: [("rev", "0-\(rev)")])
        }
        conn.register(profile: "proposeChanges") { req in
            let n = (try? ReplicationMessages.decodeProposals(req.message.body).count) ?? 0
            req.respond(body: ReplicationMessages.encodeProposalStatuses(Array(repeating: .send, count: n)))
        }
        conn.register(profile: "rev") { [self] req in
            let p = req.message.properties
            state.withLock { $0.stored.append((p["id"] ?? "", p["rev"] ?? "")) }
            if !req.message.isNoReply { req.respond() }
        }
        conn.register(profile: "subChanges") { [self] req in
            req.respond()
            let sinceText = req.message.properties["since"] ?? "0"
            let since = Int(sinceText) ?? 0
            let entries = state.withLock { s -> [ReplicationMessages.ChangeEntry] in
                s.sinces.append(sinceText)
                let out = s.stored.enumerated().filter { $0.offset + 1 > since }.map {
                    ReplicationMessages.ChangeEntry(sequence: .int(Int64($0.offset + 1)), documentID: $0.element.id,
                                                    revisionID: $0.element.rev, deletedFlags: 0)
                }
                s.listed.append(out.count)
                return out
            }
            let caughtUp = BLIPMessage.request(profile: "changes", body: Array("[]".utf8))
            guard !entries.isEmpty else { conn.send(caughtUp) { _ in }; return }
            conn.send(.request(profile: "changes", body: ReplicationMessages.encodeChanges(entries))) { _ in
                conn.send(caughtUp) { _ in }
            }
        }
    }
}

extension ListingBackPeer {
    /// The URL a replicator uses.
    var url: String { "ws://127.0.0.1:\(listener.withLock { $0?.port ?? 0 })/gateway" }
}

/// Lets `replicate(_:with:)` take the scripted peer as its passive side.
func replicate(_ active: Peer, with passive: ListingBackPeer, _ type: ReplicatorConfiguration.ReplicatorType) async throws {
    var c = ReplicatorConfiguration(database: active.db, target: passive.url)
    c.type = type
    try await Replicator(configuration: c).run()
}
