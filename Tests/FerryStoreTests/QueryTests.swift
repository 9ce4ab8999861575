@testable import FerryStore
import Testing

/// Queries (docs/store.md §8): all documents paged, by type (indexed), by predicate, field indexes.
@Suite struct QueryTests {
    func sample() throws -> (Database, TempDir) {
        let (db, dir) = try freshDatabase()
        try db.inBatch { (b) throws(StoreError) in
            for i in 0..<20 {
                try b.save(Document(id: String(format: "doc%02d", i), properties: [
                    "type": i % 2 == 0 ? "task" : "note", "n": .int(Int64(i)), "owner": .object(["name": i < 10 ? "ann" : "bob"]),
                    "done": .bool(i % 3 == 0), "maybe": i == 5 ? .null : .int(1),
                ]))
            }
        }
        try db.delete(try #require(try db.document("doc04")))
        return (db, dir)
    }

    @Test func allDocumentsArePagedByIDAndSkipTombstones() throws {
        let (db, dir) = try sample()
        _ = dir
        let first = try db.allDocuments(limit: 5)
        #expect(first.map(\.id) == ["doc00", "doc01", "doc02", "doc03", "doc05"])
        let next = try db.allDocuments(after: first.last?.id, limit: 3)
        #expect(next.map(\.id) == ["doc06", "doc07", "doc08"])
        #expect(try db.allDocuments(from: "doc10", to: "doc12").map(\.id) == ["doc10", "doc11", "doc12"])
        #expect(try db.allDocuments(limit: 100).count == 19)
        #expect(try db.allDocuments(limit: 100, includeDeleted: true).count == 20)
    }

    @Test func documentsOfATypeUseTheTypeIndex() throws {
        let (db, dir) = try sample()
        _ = dir
        #expect(try db.documents(ofType: "task").map(\.id) == ["doc00", "doc02", "doc06", "doc08", "doc10", "doc12", "doc14", "doc16", "doc18"])
        #expect(try db.explain(.equal("type", "task")).joined().contains("docs_by_type"))
    }

    @Test func predicatesCompileToSQL() throws {
        let (db, dir) = try sample()
        _ = dir
        func ids(_ p: Predicate) throws -> [Int] { try db.documents(matching: p).compactMap { $0["n"]?.intValue }.map { Int($0) } }
        #expect(try ids(.and([.equal("type", "note"), .greaterOrEqual("n", 15)])) == [15, 17, 19])
        #expect(try ids(.or([.less("n", 2), .greater("n", 18)])) == [0, 1, 19])
        #expect(try ids(.in("n", [3, 7, 4, 100])) == [3, 7])
        #expect(try ids(.equal("owner.name", "bob")).count == 10)
        #expect(try ids(.and([.equal("done", true), .lessOrEqual("n", 9)])) == [0, 3, 6, 9])
        #expect(try ids(.isNull("maybe")) == [5])
        #expect(try ids(.not(.exists("maybe"))).isEmpty)
        #expect(try ids(.and([.notEqual("type", "task"), .less("n", 4)])) == [1, 3])
        #expect(try db.documents(matching: .equal("n", 4), includeDeleted: true).isEmpty)   // tombstone body is {}
    }

    @Test func fieldIndexesAreUsed() throws {
        let (db, dir) = try sample()
        _ = dir
        #expect(!(try db.explain(.equal("owner.name", "ann")).joined().contains("docs_field_")))
        try db.createIndex(on: "owner.name")
        #expect(try db.explain(.equal("owner.name", "ann")).joined().contains("docs_field_"))
        #expect(try db.documents(matching: .equal("owner.name", "ann")).count == 9)
    }

    @Test func badPredicatesAreTypedErrors() throws {
        let (db, dir) = try sample()
        _ = dir
        for p: Predicate in [.equal("", 1), .equal("a..b", 1), .equal("a'b", 1), .equal("a", [1]), .equal("a", .null), .exists("x]")] {
            #expect(throws: StoreError.self) { try db.documents(matching: p) }
        }
    }
}
