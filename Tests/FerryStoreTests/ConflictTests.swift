@testable import FerryStore
import Testing

/// Couchbase Lite's conflict cases (docs/store.md §4) and how each resolver result is stored
/// (Protocol/revisions.md, "Storing a resolution").
@Suite struct ConflictTests {
    /// Two stores sharing generation 1 of "doc".
    func twoPeers() throws -> (Database, Database, [TempDir]) {
        let (a, da) = try freshDatabase()
        let (b, db) = try freshDatabase()
        try a.save(Document(id: "doc", properties: ["v": 0]))
        try pushCurrent("doc", from: a, to: b)
        return (a, b, [da, db])
    }

    func edit(_ db: Database, _ props: [String: JSONValue], times: Int = 1) throws {
        for i in 0..<times {
            guard var d = try db.document("doc") else { throw StoreError.notFound }
            d.properties = props
            d.properties["step"] = .int(Int64(i))
            try db.save(d)
        }
    }

    /// A passive peer (no conflicts from the wire) that deleted a document refuses an edit of
    /// it made elsewhere meanwhile — stored, the edit's live leaf would be current here while
    /// every other peer lets the deletion win — but takes an unrelated re-creation.
    @Test func aPassivePeerRefusesAnEditForkingBesideItsDeletion() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        guard let docB = try b.document("doc") else { throw StoreError.notFound }
        try b.delete(docB)
        try edit(a, ["v": "edited meanwhile"])
        let tree = try #require(try a.revisionTree(of: "doc"))
        let current = try #require(tree.current?.revisionID)
        let body = try #require(try a.documentJSON("doc")?.body)
        let edit = ReplicatedRevision(documentID: "doc", history: tree.history(of: current).map(\.description), body: body)
        #expect(throws: StoreError.conflict(documentID: "doc")) {
            try b.insert(edit, resolver: nil, allowConflicts: false)
        }
        #expect(try b.document("doc") == nil)

        let recreated = ReplicatedRevision(documentID: "doc", history: ["1-" + String(repeating: "ab", count: 20)], body: json(#"{"v":"new"}"#))
        let outcome = try b.insert(recreated, resolver: nil, allowConflicts: false)
        #expect(outcome.status == .inserted)
        #expect(try b.document("doc")?.properties == ["v": "new"])
    }

    /// Two lives of a document — deleted on one peer, created anew (unrelated history) on
    /// another — are no conflict: whichever arrives first, and whether the receiver resolves
    /// (active) or refuses conflicts (passive), the live one is current everywhere.
    @Test(arguments: [true, false])
    func aRecreationWithUnrelatedHistoryIsNoConflictEitherWay(passive: Bool) throws {
        let (old, dOld) = try freshDatabase()
        let (new, dNew) = try freshDatabase()
        _ = (dOld, dNew)
        let first = try old.save(Document(id: "doc", properties: ["life": 1]))
        try old.delete(first)
        try new.save(Document(id: "doc", properties: ["life": 2]))
        let resolver: ConflictResolver? = passive ? nil : .default
        func insertCurrent(from a: Database, to b: Database) throws -> InsertOutcome {
            let tree = try #require(try a.revisionTree(of: "doc"))
            let cur = try #require(tree.current)
            return try b.insert(ReplicatedRevision(documentID: "doc", history: tree.history(of: cur.revisionID).map(\.description),
                                                   body: cur.body ?? json("{}"), isDeleted: cur.isDeleted),
                                resolver: resolver, allowConflicts: !passive)
        }
        let intoOld = try insertCurrent(from: new, to: old)
        let intoNew = try insertCurrent(from: old, to: new)
        #expect(intoOld.conflictedWith == nil && intoNew.conflictedWith == nil)
        for db in [old, new] { #expect(try db.document("doc")?.properties == ["life": 2]) }
        #expect(try old.revisionTree(of: "doc")?.current?.revisionID == new.revisionTree(of: "doc")?.current?.revisionID)
    }

    /// When the local side wins a conflict it stays as it is — its attachments' `revpos` untouched —
    /// and the remote leaf is closed; a passive peer takes the closing tombstone (a
    /// fast-forward of its own leaf) and then the winner, which forks nothing any more.
    @Test func aLocalWinStaysAsItIsAndAPassivePeerTakesIt() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        for i in 0..<4 {
            guard var d = try a.document("doc") else { throw StoreError.notFound }
            d.properties = ["v": .int(Int64(i))]
            d.setAttachment("f.bin", blob: try a.writeBlob(Array("blob \(i)".utf8)))
            try a.save(d)
        }
        let winner = try #require(try a.revisionTree(of: "doc")?.current)
        try edit(b, ["v": "b"])
        let loser = try #require(try b.revisionTree(of: "doc")?.current?.revisionID)
        // A pulls B's leaf (generation 2): A's longer branch (generation 5) wins as it is.
        let pulled = try pushCurrent("doc", from: b, to: a)
        #expect(pulled.resolved)
        let tree = try #require(try a.revisionTree(of: "doc"))
        #expect(tree.current?.revisionID == winner.revisionID)
        let body = try JSONParser.parseObject(try #require(tree.current?.body))
        #expect(body["_attachments"]?.objectValue?["f.bin"]?.objectValue?["revpos"]?.intValue == 5)
        let closing = RevisionID.make(parent: loser, deleted: true, canonicalBody: RevisionTree.closedBody)
        #expect(tree.nodes[closing]?.isClosed == true)
        // B, passive: the tombstone closing its leaf first, then the winner.
        let first = try b.insert(ReplicatedRevision(documentID: "doc", history: tree.history(of: closing).map(\.description),
                                                    body: RevisionTree.closedBody, isDeleted: true), resolver: nil, allowConflicts: false)
        #expect(first.status == .inserted)
        let pushed = try b.insert(ReplicatedRevision(documentID: "doc", history: tree.history(of: winner.revisionID).map(\.description),
                                                     body: try #require(winner.body)), resolver: nil, allowConflicts: false)
        #expect(pushed.status == .inserted && pushed.conflictedWith == nil)
        #expect(try b.revisionTree(of: "doc")?.current?.revisionID == winner.revisionID)
    }

    /// A deletion that wins wins as it is, on both sides — the edit is closed, no second
    /// deletion is made — so a re-creation continuing that deletion on one peer is a plain
    /// successor on the other, not an edit racing some other deletion (seed 108).
    @Test func aDeletionWinsAsItIsAndARecreationAfterItSurvives() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        guard let docA = try a.document("doc") else { throw StoreError.notFound }
        let deletion = try #require(try a.delete(docA).revisionID)
        try edit(b, ["v": "edited"])
        // Each pulls the other's leaf and resolves.
        let toA = try pushCurrent("doc", from: b, to: a)
        let toB = try pushCurrent("doc", from: a, to: b)
        #expect(toA.resolved && toB.resolved)
        for db in [a, b] {
            let tree = try #require(try db.revisionTree(of: "doc"))
            #expect(tree.current?.revisionID == deletion)
            #expect(tree.leaves.filter { $0.revisionID != deletion }.allSatisfy { $0.isClosed })
        }
        let (treeA, treeB) = (try #require(try a.revisionTree(of: "doc")), try #require(try b.revisionTree(of: "doc")))
        #expect(TreeShape(treeA) == TreeShape(treeB))
        // A re-creates the document: B takes it as a successor of the deletion.
        let recreated = try a.save(Document(id: "doc", properties: ["v": "again"]))
        let onB = try pushCurrent("doc", from: a, to: b)
        #expect(onB.conflictedWith == nil)
        #expect(try b.document("doc")?.properties == ["v": "again"])
        #expect(try b.revisionTree(of: "doc")?.current?.revisionID == recreated.revisionID)
    }

    /// Two deletions of the document on two branches, then a re-creation on one peer: the
    /// re-creation closes the other deletion too, so no peer lets that deletion win over it as
    /// over an edit racing it (seed 115).
    @Test func aRecreationClosesEveryDeletionItKnowsOf() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        try edit(a, ["v": "a"])
        try edit(b, ["v": "b"])
        // Each deletes its own edit; the tombstones meet (two tombstones: no conflict).
        for db in [a, b] { try db.delete(try #require(try db.document("doc"))) }
        try pushCurrent("doc", from: b, to: a)
        try pushCurrent("doc", from: a, to: b)
        let before = try #require(try a.revisionTree(of: "doc"))
        let other = try #require(before.leaves.first { $0.isDeleted && $0.revisionID != before.current?.revisionID })
        // A re-creates on its current tombstone; the other tombstone is closed with it.
        let recreated = try a.save(Document(id: "doc", properties: ["v": "again"]))
        let treeA = try #require(try a.revisionTree(of: "doc"))
        #expect(treeA.leaves.filter { !$0.isClosed }.map(\.revisionID) == [try #require(recreated.revisionID)])
        #expect(!treeA.isLeaf(other.revisionID))
        // B gets the closing, then the re-creation (as a replicator sends every leaf, the
        // current one last): it is live.
        for leaf in treeA.leaves where leaf.revisionID != recreated.revisionID { try send("doc", revision: leaf.revisionID, from: a, to: b) }
        try pushCurrent("doc", from: a, to: b)
        #expect(try b.document("doc")?.properties == ["v": "again"])
        #expect(try b.revisionTree(of: "doc")?.current?.revisionID == recreated.revisionID)
    }

    @Test func deletionBeatsUpdateInBothDirections() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        guard let docA = try a.document("doc") else { throw StoreError.notFound }
        try a.delete(docA)
        try edit(b, ["v": "updated"], times: 3)     // even a longer branch loses to a deletion
        let toB = try pushCurrent("doc", from: a, to: b)
        #expect(toB.conflictedWith != nil && toB.resolved)
        // B kept A's tombstone as it is and purged its own losing branch: nothing new for A.
        let toA = try pushCurrent("doc", from: b, to: a)
        #expect(toA.status == .noop)
        #expect(try a.document("doc") == nil)
        #expect(try b.document("doc") == nil)
        #expect(try a.document("doc", includeDeleted: true)?.isDeleted == true)
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
        // Each side sends the rest; both end with the same tree and current revision.
        try pushAllLeaves("doc", from: a, to: b, resolver: .default)
        try pushAllLeaves("doc", from: b, to: a, resolver: .default)
        let ta = try #require(try a.revisionTree(of: "doc")), tb = try #require(try b.revisionTree(of: "doc"))
        #expect(TreeShape(ta) == TreeShape(tb))
        #expect(ta.current?.revisionID == tb.current?.revisionID)
    }

    @Test func theLongerBranchWins() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        try edit(a, ["v": "three edits"], times: 3)   // generation 4
        try edit(b, ["v": "two edits"], times: 2)     // generation 3
        try pushCurrent("doc", from: a, to: b)
        try pushCurrent("doc", from: b, to: a)
        #expect(try a.document("doc")?["v"] == "three edits")
        #expect(try b.document("doc")?["v"] == "three edits")
        #expect(try a.conflictingRevisions(of: "doc").isEmpty)
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
    }

    @Test func equalGenerationsPickTheSameWinnerOnBothSides() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        try edit(a, ["v": "from a"])
        try edit(b, ["v": "from b"])
        let revA = try #require(try a.document("doc")?.revisionID), revB = try #require(try b.document("doc")?.revisionID)
        let expected: JSONValue = revA > revB ? "from a" : "from b"
        try pushCurrent("doc", from: a, to: b)
        try pushCurrent("doc", from: b, to: a)
        #expect(try a.document("doc")?["v"] == expected)
        #expect(try b.document("doc")?["v"] == expected)
    }

    /// B holds its own edit (local) and receives A's (remote) without resolving, then resolves.
    func conflictOnB() throws -> (b: Database, local: RevisionID, remote: RevisionID, dirs: [TempDir]) {
        let (a, b, dirs) = try twoPeers()
        try edit(a, ["v": "remote", "r": true])
        try edit(b, ["v": "local", "l": true])
        let local = try #require(try b.document("doc")?.revisionID)
        let outcome = try pushCurrent("doc", from: a, to: b, resolver: nil)
        let remote = try #require(try a.document("doc")?.revisionID)
        #expect(outcome.conflictedWith == local && !outcome.resolved)
        let leaves = try #require(try b.revisionTree(of: "doc")).leaves.map(\.revisionID)
        #expect(Set(leaves) == [local, remote])
        #expect(try b.conflictingRevisions(of: "doc").count == 1)
        #expect(try b.conflictedDocumentIDs() == ["doc"])
        return (b, local, remote, dirs)
    }

    @Test func customResolverRemoteKeepsTheRemoteLeafAndClosesTheLocalOne() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let created = try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: .custom { _ in .remote })
        #expect(created == nil)
        let tree = try #require(try b.revisionTree(of: "doc"))
        #expect(tree.current?.revisionID == remote)
        #expect(tree.nodes[local] != nil, "nothing is removed")
        let closing = RevisionID.make(parent: local, deleted: true, canonicalBody: RevisionTree.closedBody)
        #expect(Set(tree.leaves.map(\.revisionID)) == [remote, closing])
        #expect(tree.nodes[closing]?.isClosed == true)
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
        #expect(try b.conflictedDocumentIDs().isEmpty)
        #expect(try b.document("doc")?["v"] == "remote")
    }

    @Test func customResolverLocalKeepsTheLocalLeafAndClosesTheRemoteOne() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let created = try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: .custom { _ in .local })
        #expect(created == nil, "the winner stays as it is")
        let tree = try #require(try b.revisionTree(of: "doc"))
        #expect(tree.current?.revisionID == local)
        let closing = RevisionID.make(parent: remote, deleted: true, canonicalBody: RevisionTree.closedBody)
        #expect(Set(tree.leaves.map(\.revisionID)) == [local, closing])
        #expect(try b.document("doc")?["v"] == "local")
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
    }

    @Test func customResolverMergedBecomesAChildOfTheHigherLeaf() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let resolver = ConflictResolver.custom { c in
            var merged = c.remote?.properties ?? [:]
            for (k, v) in c.local?.properties ?? [:] where merged[k] == nil { merged[k] = v }
            merged["v"] = "merged"
            return .merged(merged)
        }
        let created = try #require(try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: resolver))
        let doc = try #require(try b.document("doc"))
        #expect(doc.revisionID == created)
        #expect(doc.properties == ["v": "merged", "l": true, "r": true, "step": 0])
        let tree = try #require(try b.revisionTree(of: "doc"))
        #expect(tree.nodes[created]?.parent == max(local, remote))
        #expect(tree.leaves.filter { !$0.isDeleted }.map(\.revisionID) == [created])
    }

    @Test func customResolverNilDeletesWithATombstoneChildOfTheHigherLeaf() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let created = try #require(try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: .custom { _ in .delete }))
        #expect(created == RevisionID.make(parent: max(local, remote), deleted: true, canonicalBody: json("{}")))
        #expect(try b.document("doc") == nil)
        #expect(try b.document("doc", includeDeleted: true)?.revisionID == created)
        #expect(try b.revisionTree(of: "doc")?.leaves.allSatisfy(\.isDeleted) == true)
    }

    @Test func resolverSeesTombstonesAsNil() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        guard let d = try a.document("doc") else { throw StoreError.notFound }
        try a.delete(d)
        try edit(b, ["v": "live"])
        let seen = ConflictLog()
        _ = try pushCurrent("doc", from: a, to: b, resolver: .custom { c in
            seen.record(local: c.local != nil, remote: c.remote != nil)
            return .local
        })
        #expect(seen.calls == [[true, false]])
        // "local" with a deleted remote: the live local leaf stays, current beside the tombstone.
        #expect(try b.document("doc")?["v"] == "live")
    }

    @Test func sameConflictResolvedOnTwoStoresGivesTheSameRevision() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        try edit(a, ["v": "a"])
        try edit(b, ["v": "b"])
        // Exchange without resolving: both hold the same two-leaf tree.
        try pushAllLeaves("doc", from: a, to: b)
        try pushAllLeaves("doc", from: b, to: a)
        let ta = try #require(try a.revisionTree(of: "doc")), tb = try #require(try b.revisionTree(of: "doc"))
        #expect(TreeShape(ta) == TreeShape(tb))
        #expect(try a.conflictingRevisions(of: "doc").map(\.revisionID) == (try b.conflictingRevisions(of: "doc")).map(\.revisionID))
        let ra = try #require(try a.resolveConflicts(of: "doc")), rb = try #require(try b.resolveConflicts(of: "doc"))
        #expect(ra.revisionID == rb.revisionID)
        #expect(ra.properties == rb.properties)
        #expect(TreeShape(try #require(try a.revisionTree(of: "doc"))) == TreeShape(try #require(try b.revisionTree(of: "doc"))))
    }
}

/// Records resolver calls (resolvers are @Sendable; this is the only shared state).
final class ConflictLog: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLockShim()
    private var _calls: [[Bool]] = []
    func record(local: Bool, remote: Bool) { lock.with { _calls.append([local, remote]) } }
    var calls: [[Bool]] { lock.with { _calls } }
}

import Foundation
struct NSLockShim: Sendable {
    private let l = NSLock()
    func with<T>(_ body: () -> T) -> T { l.lock(); defer { l.unlock() }; return body() }
}
