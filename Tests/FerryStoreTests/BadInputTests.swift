@testable import FerryStore
import Testing

/// Malformed input gets a typed error and writes nothing.
@Suite struct BadInputTests {
    func expectNothingWritten(_ db: Database, _ body: () throws -> Void) throws {
        let seq = db.lastSequence
        let count = try db.documentCount(includeDeleted: true)
        try body()
        #expect(db.lastSequence == seq)
        #expect(try db.documentCount(includeDeleted: true) == count)
    }

    @Test func replicatedRevisionsAreChecked() throws {
        var options = DatabaseOptions()
        options.maxDocumentSize = 1024
        let (db, dir) = try freshDatabase(options)
        _ = dir
        try db.insert(ReplicatedRevision(documentID: "d", history: ["1-aa"], body: json("{}")))
        let cases: [(ReplicatedRevision, StoreError)] = [
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "1-aa"], body: json(#"{"a":}"#)),
             .invalidJSON(reason: "unexpected character at offset 5")),
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "1-aa"], body: json("[1,2]")), .notAnObject),
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "1-aa"], body: json("\"s\"")), .notAnObject),
            (ReplicatedRevision(documentID: "d", history: ["2-BB", "1-aa"], body: json("{}")), .invalidRevisionID("2-BB")),
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "x"], body: json("{}")), .invalidRevisionID("x")),
            (ReplicatedRevision(documentID: "d", history: ["3-cc", "1-aa"], body: json("{}")),
             .brokenHistory(reason: "1-aa follows 3-cc")),
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "2-aa"], body: json("{}")),
             .brokenHistory(reason: "2-aa follows 2-bb")),
            (ReplicatedRevision(documentID: "d", history: [], body: json("{}")), .brokenHistory(reason: "empty history")),
            (ReplicatedRevision(documentID: "d", history: ["2-bb", "1-aa"], body: json("{\"p\":\"" + String(repeating: "x", count: 2000) + "\"}")),
             .tooLarge(limit: 1024)),
            (ReplicatedRevision(documentID: "", history: ["1-aa"], body: json("{}")), .invalidDocumentID("")),
            (ReplicatedRevision(documentID: "_reserved/x", history: ["1-aa"], body: json("{}")), .invalidDocumentID("_reserved/x")),
        ]
        for (r, expected) in cases {
            try expectNothingWritten(db) {
                #expect(throws: expected) { try db.insert(r) }
            }
        }
        #expect(try db.revisionTree(of: "d")?.nodes.count == 1)
    }

    @Test func localSavesAreChecked() throws {
        var options = DatabaseOptions()
        options.maxDocumentSize = 1024
        let (db, dir) = try freshDatabase(options)
        _ = dir
        try expectNothingWritten(db) {
            #expect(throws: StoreError.reservedProperty("_rev")) { try db.save(Document(id: "a", properties: ["_rev": "1-ab"])) }
            #expect(throws: StoreError.reservedProperty("_deleted")) { try db.save(Document(id: "a", properties: ["_deleted": "yes"])) }
            #expect(throws: StoreError.tooLarge(limit: 1024)) {
                try db.save(Document(id: "a", properties: ["p": .string(String(repeating: "x", count: 2000))]))
            }
            #expect(throws: StoreError.invalidDocumentID(String(repeating: "x", count: 251))) {
                try db.save(Document(id: String(repeating: "x", count: 251)))
            }
            #expect(throws: StoreError.invalidJSON(reason: "unexpected end at offset 5")) { try Document(id: "a", json: json(#"{"a":"#)) }
            #expect(throws: StoreError.notAnObject) { try Document(id: "a", json: json("[]")) }
        }
    }

    @Test func batchesKeepGoodRevisionsAndReportBadOnes() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let results = try db.insert([
            ReplicatedRevision(documentID: "a", history: ["1-aa"], body: json("{}")),
            ReplicatedRevision(documentID: "b", history: ["1-bb"], body: json("{")),
            ReplicatedRevision(documentID: "c", history: ["1-cc"], body: json("{}")),
        ])
        #expect(results.map { if case .success = $0 { return true } else { return false } } == [true, false, true])
        #expect(try db.document("b", includeDeleted: true) == nil)
        #expect(try db.documentCount() == 2)
    }
}
