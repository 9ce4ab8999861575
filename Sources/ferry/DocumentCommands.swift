import ArgumentParser
import FerryStore
import Foundation

/// `ferry put`: saves a document (creating or updating its current revision).
struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Save a document: ferry put --db PATH ID '{\"json\": 1}'.")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Argument(help: "The document body, a JSON object.") var json: String

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        do {
            var doc = try db.document(id, includeDeleted: true) ?? Document(id: id)
            doc.properties = try JSONParser.parseObject(Array(json.utf8))
            let saved = try db.save(doc)
            print(saved.revisionID?.description ?? "")
        } catch {
            throw ValidationError("cannot save \(id): \(error)")
        }
    }
}

/// `ferry get`: prints a document's current revision as JSON with `_id` and `_rev`.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a document as JSON with _id and _rev.")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        var props = doc.properties
        props["_id"] = .string(doc.id)
        props["_rev"] = .string(doc.revisionID?.description ?? "")
        print(String(decoding: CanonicalJSON.encode(.object(props)), as: UTF8.self))
    }
}

/// `ferry delete`: deletes a document (a tombstone that replicates).
struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a document (the deletion replicates).")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        print(try db.delete(doc).revisionID?.description ?? "")
    }
}

/// `ferry ls`: lists documents with their current revisions.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List document IDs and current revisions.")
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Include deleted documents.") var deleted = false

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        var after: String?
        while true {
            let page = try db.allDocuments(after: after, limit: 1000, includeDeleted: deleted)
            guard let last = page.last else { break }
            for d in page { print("\(d.id)\t\(d.revisionID?.description ?? "")\(d.isDeleted ? "\tdeleted" : "")") }
            after = last.id
        }
    }
}

/// The current revision of `id`, or exit status 1 with a message when there is none.
func existingDocument(_ id: String, in db: Database) throws -> Document {
    guard let doc = try db.document(id) else {
        warn("ferry: no document \(id)")
        throw ExitCode(1)
    }
    return doc
}
