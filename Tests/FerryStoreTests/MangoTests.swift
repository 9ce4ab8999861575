@testable import FerryStore
import Testing

/// Mango as CouchDB 3.5 defines it (Sources/FerryStore/Query): the collation, selector
/// normalization and matching, index choice and `find`. CouchDB itself is the oracle in
/// Tests/Mango; these pin the rules it showed.
@Suite struct MangoTests {
    func sel(_ json: String) throws -> MangoSelector {
        try MangoSelector(json: try JSONParser.parse(Array(json.utf8)))
    }

    func doc(_ json: String) throws -> JSONValue { try JSONParser.parse(Array(json.utf8)) }

    @Test func collationOrdersTypesThenValuesAsCouchDB() {
        let ordered: [JSONValue] = [.null, false, true, .int(-2), .double(-1.5), .int(1), .double(1.5), .int(2),
                                    "", "a", "A", "b", "B", "é", "f", [], [1], [1, 2], ["a"], .object([:]), .object(["a": 1])]
        for (i, a) in ordered.enumerated() {
            for (j, b) in ordered.enumerated() {
                let c = CouchCollation.compare(a, b)
                #expect((c < 0) == (i < j) && (c == 0) == (i == j), "\(a) vs \(b): \(c)")
            }
        }
        #expect(CouchCollation.compare(.int(1), .double(1.0)) == 0)
        #expect(CouchCollation.compare(.int(Int64.max), .double(9.3e18)) < 0)
    }

    @Test func normalizationPushesFieldsAndNegationsDown() throws {
        #expect(try sel(#"{"a":{"b":{"$gt":1}}}"#) == .field(try MangoFieldPath("a.b"), .condition("$gt", 1)))
        #expect(try sel(#"{"$not":{"a":{"$lt":3}}}"#) == .field(try MangoFieldPath("a"), .condition("$gte", 3)))
        #expect(try sel(#"{"$nor":[{"a":1}]}"#) == .and([.field(try MangoFieldPath("a"), .condition("$ne", 1))]))
        #expect(try sel(#"{"a":{"$not":{"$size":2}}}"#) == .field(try MangoFieldPath("a"), .not(.condition("$size", 2))))
        #expect(try sel("{}") == .all)
    }

    @Test func badSelectorsAreRefusedWithCouchDBsNames() throws {
        func error(_ json: String) -> String? {
            do { _ = try sel(json); return nil } catch let e as MangoError { return e.error } catch { return "\(error)" }
        }
        #expect(error(#"{"a":{"$bogus":1}}"#) == "invalid_operator")
        #expect(error(#"{"a":{"$in":1}}"#) == "bad_arg")
        #expect(error(#"{"a":{"$size":-1}}"#) == "bad_arg")
        #expect(error(#"{"a":{"$mod":[2.5,1]}}"#) == "bad_arg")
        #expect(error(#"{"a":{"$regex":"("}}"#) == "bad_arg")
        #expect(error(#"{"$gt":1}"#) == "invalid_selector")
        #expect(error(#"{"a..b":1}"#) == "invalid_field_name")
        #expect(error(#"{"a":{"$where":"x"}}"#) == "not_supported")
    }

    @Test func matchingFollowsCouchDB() throws {
        let d = try doc(#"{"_id":"x","n":3,"f":2.5,"s":"Hello","t":true,"z":null,"arr":[1,2,3],"objs":[{"k":1},{"k":5}],"o":{"p":"q","r":1},"a.b":7}"#)
        let yes = [#"{"n":3}"#, #"{"n":3.0}"#, #"{"n":{"$gt":2,"$lt":4}}"#, #"{"s":{"$regex":"^H"}}"#, #"{"s":{"$beginsWith":"He"}}"#,
                   #"{"t":{"$type":"boolean"}}"#, #"{"z":{"$type":"null"}}"#, #"{"missing":{"$exists":false}}"#,
                   #"{"arr":{"$all":[3,1]}}"#, #"{"arr":{"$size":3}}"#, #"{"arr":{"$elemMatch":{"$gte":3}}}"#,
                   #"{"arr":{"$allMatch":{"$gt":0}}}"#, #"{"arr":{"$in":[9,2]}}"#, #"{"objs":{"$elemMatch":{"k":5}}}"#,
                   #"{"o":{"$keyMapMatch":{"$eq":"r"}}}"#, #"{"o.p":"q"}"#, #"{"a\\.b":7}"#, #"{"arr.1":2}"#,
                   #"{"n":{"$mod":[2,1]}}"#, #"{"$or":[{"n":1},{"f":2.5}]}"#, #"{"$or":[]}"#, #"{"n":{"$nin":[1,2]}}"#,
                   #"{"s":{"$gt":100}}"#, #"{"_id":{"$gt":"W"}}"#, #"{"s":{"$gt":"hello"}}"#]
        for q in yes { #expect(try sel(q).matches(d), "\(q)") }
        let no = [#"{"n":{"$ne":3}}"#, #"{"missing":{"$exists":true}}"#, #"{"f":{"$mod":[2,0]}}"#, #"{"arr":{"$all":[]}}"#,
                  #"{"arr":{"$elemMatch":{"$nor":[{"$eq":1}]}}}"#, #"{"arr":{"$in":[]}}"#, #"{"n":{"$mod":[0,1]}}"#,
                  #"{"missing":{"$ne":1}}"#, #"{"s":{"$lt":"hello"}}"#, #"{"$and":[{}]}"#, #"{"arr":{"$allMatch":{"$gt":1}}}"#]
        for q in no { #expect(try !sel(q).matches(d), "\(q)") }
    }

    @Test func findUsesTheIndexOrderAndRefusesAnUnindexedSort() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        for (id, v) in [("1", JSONValue.string("b")), ("2", "A"), ("3", "a"), ("4", .int(10)), ("5", .null)] {
            _ = try db.save(Document(id: id, properties: ["v": v, "n": .int(Int64(id) ?? 0)]))
        }
        _ = try db.save(Document(id: "6", properties: ["n": 6]))
        var q = MangoQuery(selector: try sel(#"{"n":{"$gt":0}}"#))
        q.sort = try MangoSort(json: ["v"])
        #expect(throws: MangoError.self) { try db.find(q) }
        _ = try db.save(Document(id: "_design/i", properties: [
            "language": "query",
            "views": .object(["v": MangoIndex(designDocument: "_design/i", name: "v", fields: [("v", "asc")], partialFilter: nil).view]),
        ]))
        let sorted = try db.find(q)
        // The index holds only documents with `v`: "6" is not among the answers.
        #expect(sorted.documents.map(\.id) == ["5", "4", "3", "2", "1"])
        #expect(sorted.index.name == "v")
        q.sort = try MangoSort(json: [.object(["v": "desc"])])
        q.limit = 2
        let first = try db.find(q)
        #expect(first.documents.map(\.id) == ["1", "2"])
        q.bookmark = first.bookmark
        #expect(try db.find(q).documents.map(\.id) == ["3", "4"])
        let unsorted = try db.find(MangoQuery(selector: try sel(#"{"n":{"$gte":5}}"#)))
        #expect(unsorted.documents.map(\.id) == ["5", "6"])
        #expect(unsorted.index == .allDocs && !unsorted.warnings.isEmpty)
    }
}
