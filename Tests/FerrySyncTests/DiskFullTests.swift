import FerryStore
@testable import FerrySync
import Foundation
import Testing

/// A peer whose disk fills up: its writes fail with a clear error, nothing it committed is
/// damaged, and a continuous replication into it catches up once space is freed. Needs root
/// (a tmpfs mount); CI runs it.
@Suite("Disk full", .serialized, .enabled(if: SmallFilesystem.available, "needs root to mount a tmpfs"))
struct DiskFullTests {
    /// `.push`: the full disk is the serving peer's (it answers 503); `.pull`: the pulling
    /// replicator's own (it ends the session, keeping its checkpoint before what it could not store).
    @Test(.timeLimit(.minutes(5)), arguments: [ReplicatorConfiguration.ReplicatorType.push, .pull])
    func aFullDiskRefusesWritesLosesNothingAndCatchesUp(_ type: ReplicatorConfiguration.ReplicatorType) async throws {
        let disk = try SmallFilesystem(megabytes: 3)
        let small = try Database.open(at: disk.path + "/small.ferry")
        let big = try await Peer.make("big")
        // ~6 MB of documents for a 3 MB disk.
        let pad = String(repeating: "x", count: 3000)
        try big.db.inBatch { (b) throws(StoreError) in
            for i in 0..<2000 { try b.save(Document(id: String(format: "doc-%04d", i), properties: ["i": .int(Int64(i)), "pad": .string(pad)])) }
        }
        var lc = SyncListener.Configuration()
        lc.port = 0
        let served = type == .push ? small : big.db
        let listener = try await SyncListener.start(serving: ["peer": served], configuration: lc)
        var c = ReplicatorConfiguration(database: type == .push ? big.db : small, target: listener.url(for: "peer"))
        c.type = type
        c.continuous = true
        c.maxAttemptWaitTime = 0.2
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        r.start()
        // The replication runs into the full disk: the session ends and is retried.
        var full: ReplicationError?
        for await s in statuses where s.activity == .offline {
            full = s.lastError
            break
        }
        switch full {
        case .remote(_, 503, let message)? where type == .push: #expect(message.contains("full"), "\(message)")
        case .store(let e)? where type == .pull: #expect(e.isTransient, "\(e)")
        default: Issue.record("expected the full disk to be reported, got \(String(describing: full))")
        }

        // A local write fails with a typed, transient error; what is stored reads back intact.
        // It is larger than the whole filesystem: the WAL space a rolled-back transaction left
        // (a listener's transactions take up to 500 revisions) cannot hold it either.
        let stored = try small.documentCount()
        #expect(stored < 2000)
        #expect {
            try small.save(Document(id: "local", properties: ["pad": .string(String(repeating: "y", count: 4 << 20))]))
        } throws: { ($0 as? StoreError)?.isTransient == true }
        #expect(try small.integrityCheck() == ["ok"])
        for d in try small.allDocuments(limit: 50) { #expect(d.properties["pad"] == .string(pad)) }

        // Space freed: the retrying replication completes.
        try disk.grow(to: 64)
        for try await _ in small.liveChanges(since: 0) where try small.documentCount() == 2000 { break }
        #expect(try small.integrityCheck() == ["ok"])
        await r.stop()
        await listener.stop()
        small.close()
        await big.stop()
    }
}
