import FerryStore
@testable import FerrySync
import Testing

/// The golden resolutions (Protocol/vectors/resolutions.json; Protocol/revisions.md, "Storing a
/// resolution") over BLIP: an active peer holding one branch pushes and pulls with a passive
/// peer holding the other. The resolving peer ends with exactly the vector's leaves — the
/// same revision IDs a REST `new_edits:false` write produces (FerryStoreTests'
/// ResolutionVectorTests) — and the passive peer with the same leaves: every leaf travels,
/// closed ones too, so the passive peer holds the branch the resolution closed even where it
/// never had it (Protocol/revisions.md, "Convergence rules").
@Suite struct ResolutionVectorReplicationTests {
    static let cases: [(ResolutionVector, Bool)] = ResolutionVector.all().flatMap { [($0, true), ($0, false)] }

    static func plant(_ v: ResolutionVector, _ branch: [ResolutionVector.Revision], in db: Database) throws {
        let last = try #require(branch.last)
        try db.insert(ReplicatedRevision(documentID: "doc", history: v.history(of: branch), body: Array(last.bodyJSON.utf8),
                                         isDeleted: last.deleted), resolver: nil)
    }

    static func leaves(_ db: Database) throws -> [String: String] {
        let tree = try #require(try db.revisionTree(of: "doc"))
        return Dictionary(uniqueKeysWithValues: tree.leaves.map {
            ($0.revisionID.description, ResolutionVector.kind(deleted: $0.isDeleted, closed: $0.isClosed))
        })
    }

    @Test(arguments: cases)
    func theResolvingPeerEndsWithTheVectorsLeaves(_ c: (ResolutionVector, Bool)) async throws {
        let (v, activeHoldsA) = c
        let active = try await Peer.make("active")
        let passive = try await Peer.make("passive", serving: true)
        try Self.plant(v, activeHoldsA ? v.branchA : v.branchB, in: active.db)
        try Self.plant(v, activeHoldsA ? v.branchB : v.branchA, in: passive.db)
        let r = try await replicate(active, with: passive)
        #expect(r.status.lastError == nil)
        #expect(try Self.leaves(active.db) == v.leaves, "\(v.name)")
        #expect(try active.current("doc") == v.current)
        #expect(try passive.current("doc") == v.current)
        let passiveLeaves = try Self.leaves(passive.db)
        #expect(passiveLeaves == v.leaves, "\(v.name)")
        // Nothing moves on a second run.
        let again = try await replicate(active, with: passive)
        #expect(again.status.lastError == nil)
        #expect(try Self.leaves(active.db) == v.leaves)
        #expect(try Self.leaves(passive.db) == passiveLeaves)
        await active.stop()
        await passive.stop()
    }
}
