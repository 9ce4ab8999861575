@testable import FerryStore
import Foundation
import Testing

/// Schema migrations on files made by older versions, and the `doc_type` column following
/// `options.typeKey`.
@Suite struct MigrationTests {
    /// A version-1 file exactly as version 1 left it: its schema, its automatic JSON-expression
    /// index on `type`, two documents and a tombstone.
    func makeVersion1(at path: String) throws {
        var sql = Schema.migrations[0]
        sql += "PRAGMA user_version = 1; PRAGMA application_id = \(Schema.applicationID);"
        sql += "INSERT INTO meta (key, value) VALUES ('uuid', '\(UUID().uuidString)');"
        sql += #"CREATE INDEX docs_field_74797065 ON docs(json_extract(body, '$."type"'));"#
        let rows: [(String, String, Bool)] = [("a", #"{"type":"task","n":1}"#, false), ("b", #"{"type":"note","n":2}"#, false),
                                              ("c", "{}", true)]
        for (i, (id, body, deleted)) in rows.enumerated() {
            var tree = RevisionTree()
            let r = tree.addChild(of: nil, deleted: deleted, canonicalBody: json(body))
            let blob = RevisionTreeCodec.encode(tree, currentInRow: r).map { String(format: "%02x", $0) }.joined()
            sql += "INSERT INTO docs (doc_id, rev_id, deleted, conflicted, sequence, body, tree) VALUES "
            sql += "('\(id)', '\(r)', \(deleted ? 1 : 0), 0, \(i + 1), '\(body)', X'\(blob)');"
        }
        sql += "UPDATE meta SET value = 3 WHERE key = 'last_sequence';"
        try rawExec(path, sql)
    }

    @Test func aVersion1DatabaseMigratesToTheTypeColumn() throws {
        let dir = TempDir()
        let path = dir.path("v1.ferry")
        try makeVersion1(at: path)
        let db = try Database.open(at: path)
        defer { db.close() }
        #expect(try rawScalar(path, "PRAGMA user_version") == "\(Schema.currentVersion)")
        #expect(try db.documents(ofType: "task").map(\.id) == ["a"])
        #expect(try db.explain(.equal("type", "note")).joined().contains("docs_by_type"))
        // The old per-write JSON index is gone; the documents are intact.
        #expect(try rawScalar(path, "SELECT count(*) FROM sqlite_master WHERE name = 'docs_field_74797065'") == "0")
        #expect(try rawScalar(path, "SELECT group_concat(doc_type, ',') FROM (SELECT doc_type FROM docs ORDER BY doc_id)") == "task,note")
        #expect(try db.document("b")?["n"] == 2)
        #expect(try db.document("c", includeDeleted: true)?.isDeleted == true)
        #expect(db.lastSequence == 3)
        #expect(try db.integrityCheck() == ["ok"])
        // Writes after the migration keep the column current.
        var a = try #require(try db.document("a"))
        a["type"] = "note"
        try db.save(a)
        #expect(try db.documents(ofType: "note").map(\.id) == ["a", "b"])
    }

    @Test func theTypeColumnFollowsTheTypeKeyItWasOpenedWith() throws {
        let dir = TempDir()
        let path = dir.path("k.ferry")
        var db = try Database.open(at: path)
        try db.save(Document(id: "a", properties: ["type": "x", "kind": "k1", "meta": ["t": "m1"]]))
        try db.insert(ReplicatedRevision(documentID: "b", history: ["1-aa"], body: json(#"{"kind":"k1","type":"y"}"#)))
        #expect(try db.documents(ofType: "x").map(\.id) == ["a"])
        db.close()

        var options = DatabaseOptions()
        options.typeKey = "kind"
        db = try Database.open(at: path, options: options)
        #expect(try db.documents(ofType: "k1").map(\.id) == ["a", "b"])
        #expect(try db.documents(ofType: "x").isEmpty)
        try db.insert(ReplicatedRevision(documentID: "c", history: ["1-aa"], body: json(#"{"k\u0069nd":"k1"}"#)))
        #expect(try db.documents(ofType: "k1").map(\.id) == ["a", "b", "c"])
        db.close()

        options.typeKey = "meta.t"
        db = try Database.open(at: path, options: options)
        defer { db.close() }
        #expect(try db.documents(ofType: "m1").map(\.id) == ["a"])
        try db.insert(ReplicatedRevision(documentID: "d", history: ["1-aa"], body: json(#"{"meta":{"t":"m1"}}"#)))
        #expect(try db.documents(ofType: "m1").map(\.id) == ["a", "d"])
    }

    @Test func theTypeOfAConflictedDocumentIsTheCurrentRevisionsType() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.insert(ReplicatedRevision(documentID: "d", history: ["1-bb"], body: json(#"{"type":"winner"}"#)))
        // A lower branch arrives and stays as a conflict: the type must not follow it.
        try db.insert(ReplicatedRevision(documentID: "d", history: ["1-aa"], body: json(#"{"type":"loser"}"#)), resolver: nil)
        #expect(try db.documents(ofType: "winner").map(\.id) == ["d"])
        #expect(try db.documents(ofType: "loser").isEmpty)
        // A value that is not a string is no type, as json_extract-text would have it.
        try db.save(Document(id: "n", properties: ["type": 3]))
        #expect(try rawScalar(db.path, "SELECT count(*) FROM docs WHERE doc_type IS NOT NULL") == "1")
    }
}
