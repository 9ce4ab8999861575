@testable import FerryStore
import Testing

/// Mango indexes on SQLite (`mango_entries`): keys whose bytes sort as CouchDB's collation,
/// entries kept by every write, and `find` over them answering what a full scan answers.
@Suite struct MangoIndexTests {
    /// A value generator over every JSON type, with the collation's tricky spots (case,
    /// accents, prefixes, `-0.0`, integers equal to floats, empty names and containers).
    struct Values {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        mutating func value(depth: Int = 0) -> JSONValue {
            let scalars: [JSONValue] = [.null, false, true, .int(0), .double(-0.0), .int(-3), .double(2.5), .int(2), .double(2.0),
                                        .int(1 << 60), "", "a", "A", "ab", "b", "é", "e", "Z", "a b", "-", "日本", "\u{0}x"]
            if depth < 2 && next(5) == 0 {
                return next(2) == 0
                    ? .array((0..<next(3)).map { _ in value(depth: depth + 1) })
                    : .object(Dictionary((0..<next(3)).map { _ in (["", "a", "B", "b"][next(4)], value(depth: depth + 1)) },
                                         uniquingKeysWith: { a, _ in a }))
            }
            return scalars[next(scalars.count)]
        }
    }

    @Test func collationKeysSortAsTheCollation() {
        var g = Values(state: 7)
        let values = (0..<400).map { _ in g.value() }
        for a in values {
            for b in values.prefix(60) {
                let c = CouchCollation.compare(a, b)
                let ka = CollationKey.encode([a]), kb = CollationKey.encode([b])
                let k = ka == kb ? 0 : (ka.lexicographicallyPrecedes(kb) ? -1 : 1)
                #expect(k == c.signum(), "\(a) vs \(b): collation \(c), keys \(k)")
            }
        }
    }

    func indexDocument(_ name: String, _ fields: [String], partial: JSONValue? = nil) -> Document {
        Document(id: "_design/\(name)", properties: [
            "language": "query",
            "views": .object([name: MangoIndex(designDocument: "_design/\(name)", name: name, fields: fields.map { ($0, "asc") },
                                               partialFilter: partial).view]),
        ])
    }

    /// What `find` must answer, by brute force: the index's documents matching, in its order.
    func expected(_ db: Database, _ selector: MangoSelector, columns: [String], descending: Bool) throws -> [String] {
        let paths = try columns.map { try MangoFieldPath($0) }
        var rows: [(key: [JSONValue], id: String)] = []
        for doc in try db.allDocuments(limit: 100_000) where !Document.isDesignID(doc.id) {
            let json = Database.mangoJSON(doc)
            let key = paths.compactMap { p -> JSONValue? in
                if case .found(let v) = p.lookup(in: json) { return v }
                return nil
            }
            guard key.count == paths.count, selector.matches(json) else { continue }
            rows.append((key, doc.id))
        }
        rows.sort { a, b in
            let c = CouchCollation.compare(.array(a.key), .array(b.key))
            return c != 0 ? c < 0 : a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
        }
        return descending ? rows.reversed().map(\.id) : rows.map(\.id)
    }

    func sel(_ json: String) throws -> MangoSelector { try MangoSelector(json: try JSONParser.parse(Array(json.utf8))) }

    @Test func findOnAnIndexAnswersWhatAFullScanDoesThroughWritesAndPaging() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        var g = Values(state: 11)
        for i in 0..<300 {
            var props: [String: JSONValue] = ["n": .int(Int64(i % 17))]
            if g.next(6) != 0 { props["v"] = g.value() }
            _ = try db.save(Document(id: "d\(g.next(1000))-\(i)", properties: props))
        }
        _ = try db.save(indexDocument("vn", ["v", "n"]))
        let selectors = [#"{"v":{"$gt":null}}"#, #"{"v":{"$gte":"a","$lt":"b"}}"#, #"{"v":{"$eq":2},"n":{"$gt":3}}"#,
                         #"{"v":{"$lte":2.5},"n":{"$lt":9}}"#, #"{"v":"a","n":{"$gte":0}}"#, #"{"v":{"$gt":[]}}"#,
                         #"{"v":{"$exists":true},"n":{"$in":[1,2,3]}}"#, #"{"v":{"$lt":{}}}"#]
        func check(_ round: String) throws {
            for text in selectors {
                let selector = try sel(text)
                for descending in [false, true] {
                    let want = try expected(db, selector, columns: ["v", "n"], descending: descending)
                    var q = MangoQuery(selector: selector)
                    let direction = JSONValue.string(descending ? "desc" : "asc")
                    q.sort = try MangoSort(json: [.object(["v": direction]), .object(["n": direction])])
                    q.useIndex = ["vn"]
                    q.limit = 1000
                    let all = try db.find(q)
                    #expect(all.index.name == "vn")
                    #expect(all.documents.map(\.id) == want, "\(round) \(text) desc=\(descending)")
                    // Pages of 7 with the bookmark, and a skip, give the same rows.
                    q.limit = 7
                    var paged: [String] = []
                    while true {
                        let page = try db.find(q)
                        paged += page.documents.map(\.id)
                        if page.documents.count < 7 { break }
                        q.bookmark = page.bookmark
                    }
                    #expect(paged == want, "\(round) paged \(text) desc=\(descending)")
                    q.bookmark = nil
                    q.skip = 5
                    #expect(try db.find(q).documents.map(\.id) == Array(want.dropFirst(5).prefix(7)), "\(round) skip \(text)")
                }
            }
        }
        try check("built")
        // Every kind of write after the build: updates (some losing `v`), deletions, purges,
        // new documents.
        for doc in try db.allDocuments(limit: 1000) where !Document.isDesignID(doc.id) {
            switch g.next(5) {
            case 0: _ = try db.delete(doc)
            case 1: try db.purge(doc.id)
            case 2:
                var d = doc
                d.properties["v"] = g.next(3) == 0 ? nil : g.value()
                _ = try db.save(d)
            default: break
            }
        }
        for i in 0..<50 { _ = try db.save(Document(id: "new-\(i)", properties: ["v": g.value(), "n": .int(Int64(i))])) }
        try check("after writes")
        // Redefining the index drops the old entries and builds anew.
        var ddoc = try #require(try db.document("_design/vn"))
        ddoc.properties = indexDocument("vn", ["v", "n"], partial: ["n": .object(["$gt": 8])]).properties
        _ = try db.save(ddoc)
        #expect(try rawScalar(dir.path("test.ferry"), "SELECT count(*) FROM mango_indexes") == "0")
        var q = MangoQuery(selector: try sel(#"{"v":{"$gt":null}}"#))
        q.sort = try MangoSort(json: ["v", "n"])
        q.useIndex = ["vn"]
        q.limit = 1000
        #expect(try db.find(q).documents.map(\.id) == expected(db, try sel(#"{"v":{"$gt":null},"n":{"$gt":8}}"#), columns: ["v", "n"], descending: false))
        #expect(try rawScalar(dir.path("test.ferry"), "SELECT count(*) FROM mango_indexes") == "1")
        _ = try db.delete(try #require(try db.document("_design/vn")))
        #expect(try rawScalar(dir.path("test.ferry"), "SELECT count(*) FROM mango_entries") == "0")
    }

    @Test func aDeferringBatchLeavesTheEntriesToTheNextQuery() throws {
        let (db, dir) = try freshDatabase()
        let path = dir.path("test.ferry")
        var g = Values(state: 23)
        for i in 0..<200 { _ = try db.save(Document(id: "d\(i)", properties: ["v": g.value()])) }
        _ = try db.save(indexDocument("v", ["v"]))
        var q = MangoQuery(selector: try sel(#"{"v":{"$gt":null}}"#))
        q.sort = try MangoSort(json: ["v"])
        q.useIndex = ["v"]
        q.limit = 1000
        #expect(try db.find(q).documents.map(\.id) == expected(db, q.selector, columns: ["v"], descending: false))

        // A replicated batch that defers: new documents, updates (some losing `v`), deletions.
        let docs = try db.allDocuments(limit: 1000).filter { !Document.isDesignID($0.id) }
        try db.inBatch { (b) throws(StoreError) in
            b.defersIndexUpdates = true
            for (i, doc) in docs.enumerated() where i % 3 != 0 {
                let current = doc.revisionID?.description ?? ""
                let generation = (doc.revisionID?.generation ?? 1) + 1
                let body: JSONValue = i % 5 == 0 ? .object([:]) : .object(["v": g.value()])
                _ = try b.insert(ReplicatedRevision(documentID: doc.id, history: ["\(generation)-\(String(i + 0x1000, radix: 16))", current],
                                                    body: CanonicalJSON.encode(body), isDeleted: i % 7 == 0), resolver: nil)
            }
            for i in 0..<50 {
                _ = try b.insert(ReplicatedRevision(documentID: "new\(i)", history: ["1-aa"],
                                                    body: CanonicalJSON.encode(.object(["v": g.value()]))), resolver: nil)
            }
        }
        #expect(try rawScalar(path, "SELECT count(*) FROM mango_indexes WHERE stale_from IS NOT NULL") == "1")
        #expect(try rawScalar(path, "SELECT count(*) FROM mango_entries e JOIN docs d USING (doc_key) WHERE d.doc_id LIKE 'new%'") == "0")
        // The next query brings the index up to date, then answers what a full scan answers.
        let want = try expected(db, q.selector, columns: ["v"], descending: false)
        #expect(try db.find(q).documents.map(\.id) == want)
        #expect(try rawScalar(path, "SELECT count(*) FROM mango_indexes WHERE stale_from IS NOT NULL") == "0")
        #expect(try rawScalar(path, "SELECT count(*) FROM mango_entries") == "\(try expected(db, .all, columns: ["v"], descending: false).count)")
        // A write that keeps the index (not deferring) leaves it current.
        _ = try db.save(Document(id: "later", properties: ["v": 1]))
        #expect(try rawScalar(path, "SELECT count(*) FROM mango_indexes WHERE stale_from IS NOT NULL") == "0")
        #expect(try db.find(q).documents.map(\.id) == expected(db, q.selector, columns: ["v"], descending: false))
    }

    @Test func anIndexedEqualityReadsOnlyItsRows() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.inBatch { (b) throws(StoreError) in
            for i in 0..<2000 { _ = try b.save(Document(id: "d\(i)", properties: ["k": .int(Int64(i % 100))])) }
        }
        _ = try db.save(indexDocument("k", ["k"]))
        let r = try db.find(MangoQuery(selector: try sel(#"{"k":42}"#)))
        #expect(r.documents.count == 20 && r.index.name == "k")
        #expect(r.keysExamined == 20 && r.documentsExamined == 20)
    }
}

/// The typed selector builder gives the selectors the JSON form gives.
@Suite struct MangoBuilderTests {
    func sel(_ json: String) throws -> MangoSelector { try MangoSelector(json: try JSONParser.parse(Array(json.utf8))) }

    @Test func typedSelectorsEqualTheirJSONForms() throws {
        #expect(MangoSelector.field("age", .greaterThan(21)) == (try sel(#"{"age":{"$gt":21}}"#)))
        #expect((.field("type", .equals("task")) && .field("prio", .atLeast(2)))
                == (try sel(#"{"$and":[{"type":"task"},{"prio":{"$gte":2}}]}"#)))
        #expect((!.field("a", .lessThan(3))) == (try sel(#"{"$not":{"a":{"$lt":3}}}"#)))
        #expect((.field("a", .isIn([1, 2])) || .field("b", .exists(false))) == (try sel(#"{"$or":[{"a":{"$in":[1,2]}},{"b":{"$exists":false}}]}"#)))
        #expect(MangoSelector.field("n", .modulo(3, is: 1)) == (try sel(#"{"n":{"$mod":[3,1]}}"#)))
    }

    @Test func aTypedQueryFindsWhatTheJSONOneFinds() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        for i in 0..<30 {
            _ = try db.save(Document(id: "d\(i)", properties: ["type": i % 3 == 0 ? "task" : "note", "prio": .int(Int64(i % 5)),
                                                              "tags": i % 2 == 0 ? ["x", "y"] : ["y"]]))
        }
        var typed = MangoQuery(selector: .field("type", .equals("task")) && .field("prio", .atLeast(2))
                                          && .field("tags", .containsAll(["x"])))
        typed.limit = 100
        var json = MangoQuery(selector: try sel(#"{"type":"task","prio":{"$gte":2},"tags":{"$all":["x"]}}"#))
        json.limit = 100
        let a = try db.find(typed).documents.map(\.id), b = try db.find(json).documents.map(\.id)
        #expect(a == b && a == ["d12", "d18", "d24"])
    }
}
