@testable import FerryStore
import Testing

/// The Couchbase-Lite-shaped custom resolver (`ConflictResolver.custom` returning `Document?`)
/// in the store: each answer stored as the matching `ConflictResolution`, and the cases Couchbase
/// Lite documents — another ID, another database's document, a throw.
extension ConflictTests {
    struct Declined: Error {}

    /// The leaves of `doc` on `b`, for checking that a declined resolution changed nothing.
    func leaves(_ b: Database) throws -> Set<RevisionID> {
        Set(try #require(try b.revisionTree(of: "doc")).leaves.map(\.revisionID))
    }

    @Test func documentResolverReturningASideKeepsThatLeafAsItIs() throws {
        for keepRemote in [true, false] {
            let (b, local, remote, dirs) = try conflictOnB()
            _ = dirs
            let created = try b.resolveConflict(documentID: "doc", local: local, remote: remote,
                                                using: .custom { c in keepRemote ? c.remote : c.local })
            #expect(created == nil, "no new revision: the kept leaf stays")
            #expect(try b.document("doc")?.revisionID == (keepRemote ? remote : local))
            #expect(try b.conflictingRevisions(of: "doc").isEmpty)
        }
    }

    @Test func documentResolverReturningAnEditedDocumentMergesOntoTheHigherLeaf() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let created = try #require(try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: .custom { c in
            var merged = c.remote
            merged?.properties["v"] = "merged"
            return merged
        }))
        #expect(try b.revisionTree(of: "doc")?.nodes[created]?.parent == max(local, remote))
        #expect(try b.document("doc")?["v"] == "merged")
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
    }

    @Test func documentResolverReturningNilDeletes() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        let created = try #require(try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: .custom { _ in nil }))
        #expect(try b.document("doc", includeDeleted: true)?.revisionID == created)
        #expect(try b.document("doc") == nil)
    }

    @Test func aDocumentWithAnotherIDIsSavedUnderTheConflictingID() throws {
        let (b, local, remote, dirs) = try conflictOnB()
        _ = dirs
        try b.resolveConflict(documentID: "doc", local: local, remote: remote,
                              using: .custom { _ in Document(id: "renamed", properties: ["who": "resolver"]) })
        #expect(try b.document("doc")?.properties == ["who": "resolver"])
        #expect(try b.document("renamed") == nil, "nothing saved under the other ID")
        #expect(try b.conflictingRevisions(of: "doc").isEmpty)
    }

    @Test func aThrowOrAnotherDatabasesDocumentIsAnErrorAndTheConflictStays() throws {
        let (elsewhere, dir) = try freshDatabase()
        _ = dir
        let foreign = try elsewhere.save(Document(id: "doc", properties: ["v": "elsewhere"]))
        for bad in [ConflictResolver.custom { _ in throw Declined() }, .custom { _ in foreign }] {
            let (b, local, remote, dirs) = try conflictOnB()
            _ = dirs
            let before = try leaves(b)
            #expect {
                try b.resolveConflict(documentID: "doc", local: local, remote: remote, using: bad)
            } throws: { error in
                guard case StoreError.rejected(status: 409, _)? = error as? StoreError else { return false }
                return true
            }
            #expect(try leaves(b) == before, "nothing written: the conflict stays")
            #expect(try b.conflictingRevisions(of: "doc").count == 1)
        }
    }

    /// A replicated insert keeps what it was given even when its resolver declines: the
    /// revision is stored, the conflict stays for the application.
    @Test func anInsertWhoseResolverThrowsKeepsTheRevisionAndTheConflict() throws {
        let (a, b, dirs) = try twoPeers()
        _ = dirs
        try edit(a, ["v": "remote"])
        try edit(b, ["v": "local"])
        let outcome = try pushCurrent("doc", from: a, to: b, resolver: .custom { _ in throw Declined() })
        #expect(outcome.status == .inserted && outcome.conflictedWith != nil && !outcome.resolved)
        #expect(try leaves(b).contains(try #require(try a.document("doc")?.revisionID)))
        #expect(try b.conflictingRevisions(of: "doc").count == 1)
    }
}
