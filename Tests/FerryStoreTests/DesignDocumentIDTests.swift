@testable import FerryStore
import Testing

/// Which IDs the store takes (CouchDB's rule): design documents' `_design/NAME` are documents
/// like any other, saved and replicated with their history; every other `_` ID stays refused.
@Suite("Document IDs: design documents are documents, other reserved IDs are refused")
struct DesignDocumentIDTests {
    @Test func theIDRule() throws {
        for id in ["a", "_design/app", "_design/a/b", "_design/_x", "doc_1", String(repeating: "x", count: 250)] {
            #expect(throws: Never.self, "\(id)") { try Document.validateID(id) }
        }
        for id in ["", "_", "_design", "_design/", "_local/x", "_foo", "_designx/a", "_Design/a", "a\u{1}",
                   "_design/" + String(repeating: "x", count: 243)] {
            #expect(throws: StoreError.invalidDocumentID(id), "\(id.debugDescription)") { try Document.validateID(id) }
        }
        #expect(Document.isDesignID("_design/app"))
        #expect(!Document.isDesignID("_design/"))
        #expect(!Document.isDesignID("design/app"))
    }

    @Test func aDesignDocumentIsSavedReadListedAndDeleted() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        let body: [String: JSONValue] = ["views": ["all": ["map": "function (doc) { emit(doc._id, null) }"]],
                                         "validate_doc_update": "function (n, o, u) { throw({forbidden: 'no'}) }"]
        let saved = try db.save(Document(id: "_design/app", properties: body))
        _ = try db.save(Document(id: "plain"))
        #expect(try db.document("_design/app")?.properties == body)
        #expect(try db.allDocuments().map(\.id) == ["_design/app", "plain"])
        #expect(try db.changes().map(\.documentID).contains("_design/app"))
        // Its functions are kept, not run: a save the validation function would refuse passes.
        _ = try db.save(Document(id: "other"))
        try db.delete(saved)
        #expect(try db.document("_design/app") == nil)
        #expect(try db.document("_design/app", includeDeleted: true)?.isDeleted == true)
    }

    @Test func aReplicatedDesignDocumentKeepsItsHistory() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        try db.insert(ReplicatedRevision(documentID: "_design/app", history: ["2-bb", "1-aa"], body: json(#"{"views":{}}"#)))
        let tree = try #require(try db.revisionTree(of: "_design/app"))
        #expect(tree.leaves.map(\.revisionID) == [rev("2-bb")])
        #expect(tree.history(of: rev("2-bb")) == [rev("2-bb"), rev("1-aa")])
    }

    @Test func otherReservedIDsWriteNothing() throws {
        let (db, dir) = try freshDatabase()
        _ = dir
        for id in ["_foo", "_design/", "_local/x"] {
            #expect(throws: StoreError.invalidDocumentID(id)) { try db.save(Document(id: id)) }
            #expect(throws: StoreError.invalidDocumentID(id)) {
                try db.insert(ReplicatedRevision(documentID: id, history: ["1-aa"], body: json("{}")))
            }
        }
        #expect(db.lastSequence == 0)
    }
}
