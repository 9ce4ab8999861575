@testable import FerryStore
import Foundation
import Testing

/// Property test (own seeded generator; the seed is in every failure message, and
/// `FERRY_PROPERTY_SEED=<n>` replays one): random edit / delete / replicate / resolve histories
/// on three simulated peers, then
/// 1. after every peer has received every revision, all peers hold the same tree, current
///    revision and conflict set for every document;
/// 2. the same revisions inserted one by one into fresh stores in two other random orders give
///    the same trees again;
/// 3. resolving with the default rule on two stores yields the same revision IDs and bodies.
@Suite struct ConvergenceTests {
    static let docs = ["d0", "d1", "d2"]

    static var seeds: [UInt64] {
        if let s = ProcessInfo.processInfo.environment["FERRY_PROPERTY_SEED"], let n = UInt64(s) { return [n] }
        return (1...30).map { UInt64($0) &* 0x9E37_79B9 }
    }

    @Test(arguments: seeds)
    func peersConverge(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let dir = TempDir()
        let peers = try (0..<3).map { try Database.open(at: dir.path("peer\($0).ferry")) }
        defer { peers.forEach { $0.close() } }

        for _ in 0..<40 {
            let p = peers[Int.random(in: 0..<peers.count, using: &rng)]
            let id = Self.docs[Int.random(in: 0..<Self.docs.count, using: &rng)]
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:   // edit (create or recreate if needed)
                var doc = try p.document(id) ?? Document(id: id)
                doc["value"] = .int(Int64.random(in: 0..<5, using: &rng))
                doc["tag"] = .string(["x", "y", "z"][Int.random(in: 0..<3, using: &rng)])
                try p.save(doc)
            case 4:       // delete
                if let doc = try p.document(id) { try p.delete(doc) }
            case 5..<9:   // replicate every leaf to another peer, resolving or not
                let q = peers[Int.random(in: 0..<peers.count, using: &rng)]
                if q !== p {
                    try pushAllLeaves(id, from: p, to: q, resolver: Bool.random(using: &rng) ? .default : nil)
                }
            default:      // resolve visible conflicts
                if try p.revisionTree(of: id) != nil { try p.resolveConflicts(of: id) }
            }
        }

        // Everyone receives everything (no resolution: the set of revisions stays fixed).
        for q in peers.dropFirst() { for id in Self.docs { try pushAllLeaves(id, from: q, to: peers[0]) } }
        for q in peers.dropFirst() { for id in Self.docs { try pushAllLeaves(id, from: peers[0], to: q) } }

        for id in Self.docs {
            let trees = try peers.map { try $0.revisionTree(of: id) }
            guard let reference = trees[0] else {
                #expect(trees.allSatisfy { $0 == nil }, "seed \(seed): \(id) exists on some peers only")
                continue
            }
            for (i, t) in trees.enumerated() {
                guard let t else { Issue.record("seed \(seed): \(id) missing on peer \(i)"); continue }
                #expect(TreeShape(t) == TreeShape(reference), "seed \(seed): \(id) tree differs on peer \(i)")
                #expect(t.current?.revisionID == reference.current?.revisionID, "seed \(seed): \(id) current differs on peer \(i)")
                #expect(t.conflicts == reference.conflicts, "seed \(seed): \(id) conflicts differ on peer \(i)")
                #expect(try peers[i].document(id, includeDeleted: true)?.revisionID == reference.current?.revisionID,
                        "seed \(seed): \(id) stored current differs on peer \(i)")
            }

            // Same revisions, other arrival orders, one revision at a time.
            for order in 0..<2 {
                let fresh = try Database.open(at: dir.path("fresh-\(id)-\(order).ferry"))
                defer { fresh.close() }
                var nodes = Array(reference.nodes.values)
                nodes.shuffle(using: &rng)
                for n in nodes {
                    try fresh.insert(ReplicatedRevision(documentID: id, history: reference.history(of: n.revisionID).map(\.description),
                                                        body: n.body ?? json("{}"), isDeleted: n.isDeleted), resolver: nil)
                }
                let t = try #require(try fresh.revisionTree(of: id))
                #expect(TreeShape(t) == TreeShape(reference), "seed \(seed): \(id) order \(order) gives another tree")
                #expect(t.current?.revisionID == reference.current?.revisionID, "seed \(seed): \(id) order \(order) current")
                #expect(t.conflicts == reference.conflicts, "seed \(seed): \(id) order \(order) conflicts")
            }

            // Resolving the same conflicts with the default rule on two stores.
            let r0 = try peers[0].resolveConflicts(of: id)
            let r1 = try peers[1].resolveConflicts(of: id)
            #expect(r0?.revisionID == r1?.revisionID, "seed \(seed): \(id) resolved to different revisions")
            #expect(r0?.properties == r1?.properties, "seed \(seed): \(id) resolved to different bodies")
            #expect(r0?.isDeleted == r1?.isDeleted, "seed \(seed): \(id) resolved differently")
            let after0 = try #require(try peers[0].revisionTree(of: id)), after1 = try #require(try peers[1].revisionTree(of: id))
            #expect(TreeShape(after0) == TreeShape(after1), "seed \(seed): \(id) trees differ after resolving")
            #expect(after0.conflicts.isEmpty, "seed \(seed): \(id) still in conflict after resolving")
        }
    }
}
