@testable import FerryStore
import Testing

/// The golden resolutions (Protocol/vectors/resolutions.json; Protocol/revisions.md, "Storing a
/// resolution") at the store: whichever branch arrives first, a `resolve` database ends with
/// exactly the vector's leaves — every revision given kept, the loser closed — and a `keep`
/// database with both branches open as given.
@Suite struct ResolutionVectorTests {
    static let vectors = ResolutionVector.all()

    @Test func theVectorsAreThere() {
        #expect(Self.vectors.count >= 5)
    }

    static func revisions(_ v: ResolutionVector, _ branch: [ResolutionVector.Revision]) throws -> ReplicatedRevision {
        let last = try #require(branch.last)
        return ReplicatedRevision(documentID: "doc", history: v.history(of: branch), body: json(last.bodyJSON), isDeleted: last.deleted)
    }

    /// The leaves of a stored tree as the vectors name them.
    static func leaves(_ db: Database) throws -> [String: String] {
        let tree = try #require(try db.revisionTree(of: "doc"))
        return Dictionary(uniqueKeysWithValues: tree.leaves.map {
            ($0.revisionID.description, ResolutionVector.kind(deleted: $0.isDeleted, closed: $0.isClosed))
        })
    }

    @Test(arguments: vectors, [true, false])
    func aResolveDatabaseEndsWithTheVectorsLeaves(_ v: ResolutionVector, aFirst: Bool) throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let a = try Self.revisions(v, v.branchA), b = try Self.revisions(v, v.branchB)
        // One `_bulk_docs new_edits:false` batch, as a CouchDB replicator writes it.
        let outcomes = try db.insert(aFirst ? [a, b] : [b, a])
        for o in outcomes { _ = try o.get() }
        #expect(try Self.leaves(db) == v.leaves)
        #expect(try db.revisionTree(of: "doc")?.current?.revisionID.description == v.current)
        // Every revision handed over is still there.
        let tree = try #require(try db.revisionTree(of: "doc"))
        for r in v.base + v.branchA + v.branchB { #expect(tree.nodes[rev(r.rev)] != nil, "\(r.rev) was dropped") }
    }

    @Test(arguments: vectors)
    func aKeepDatabaseKeepsBothBranchesOpen(_ v: ResolutionVector) throws {
        var options = DatabaseOptions()
        options.initialConflictPolicy = .keep
        let (db, dir) = try freshDatabase(options)
        _ = dir
        #expect(db.conflictPolicy == .keep)
        for o in try db.insert([try Self.revisions(v, v.branchA), try Self.revisions(v, v.branchB)]) { _ = try o.get() }
        let expected = Dictionary(uniqueKeysWithValues: [v.branchA, v.branchB].compactMap(\.last).map { ($0.rev, $0.deleted ? "deleted" : "live") })
        #expect(try Self.leaves(db) == expected)
    }

    /// The policy is kept in the file.
    @Test func thePolicyIsRecordedInTheFile() throws {
        let dir = TempDir()
        let path = dir.path("p.ferry")
        do {
            let db = try Database.open(at: path)
            #expect(db.conflictPolicy == .resolve)
            try db.setConflictPolicy(.keep)
            db.close()
        }
        let again = try Database.open(at: path)
        #expect(again.conflictPolicy == .keep)
        again.close()
    }
}
