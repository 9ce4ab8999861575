@testable import FerryStore
import Testing

/// `Database.liveQuery`: a result set at once, then one per commit that changes the result,
/// each equal to what `find` answers after that commit.
@Suite struct LiveQueryTests {
    @Test func everyEmissionIsAFreshFindAfterAThousandRandomWrites() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        _ = try db.save(Document(id: "_design/v", properties: [
            "language": "query",
            "views": .object(["v": MangoIndex(designDocument: "_design/v", name: "v", fields: [("v", "asc")], partialFilter: nil).view]),
        ]))
        var query = MangoQuery(selector: try MangoSelector(json: try JSONParser.parse(Array(#"{"v":{"$gte":6}}"#.utf8))))
        query.sort = try MangoSort(json: ["v"])
        query.limit = 40
        func identity(_ docs: [Document]) -> [String] { docs.map { $0.id + "@" + ($0.revisionID?.description ?? "") } }

        var updates = db.liveQuery(query).makeAsyncIterator()
        var emitted = identity(try #require(try await updates.next()).documents)
        #expect(emitted == identity(try db.find(query).documents))
        var state: UInt64 = 5
        func random(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        var emissions = 0
        for _ in 0..<1000 {
            let id = "d\(random(120))"
            let existing = try db.document(id)
            switch (existing, random(6)) {
            case (let doc?, 0): _ = try db.delete(doc)
            case (var doc?, _):
                doc.properties["v"] = .int(Int64(random(10)))
                _ = try db.save(doc)
            case (nil, _): _ = try db.save(Document(id: id, properties: ["v": .int(Int64(random(10)))]))
            }
            let fresh = identity(try db.find(query).documents)
            guard fresh != emitted else { continue }
            let update = try #require(try await updates.next())
            #expect(identity(update.documents) == fresh)
            #expect(update.sequence == db.lastSequence)
            emitted = fresh
            emissions += 1
        }
        #expect(emissions > 300)
    }

    @Test func aLiveQueryEndsWhenTheDatabaseCloses() async throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let waiting = Task {
            var updates = db.liveQuery(MangoQuery(selector: .all)).makeAsyncIterator()
            _ = try await updates.next()
            return try await updates.next()
        }
        db.close()
        // Closed before the first result or while waiting for the second: it ends either way.
        #expect(try await waiting.value == nil)
    }
}
