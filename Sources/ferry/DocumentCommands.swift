import ArgumentParser
import FerryStore
import Foundation

/// `ferry put`: saves a document (creating or updating its current revision).
struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Save a document: ferry put --db PATH ID '{\"json\": 1}'.")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Argument(help: "The document body, a JSON object.") var json: String
    @Option(name: .customLong("attach"), help: ArgumentHelp(
        "Attach a file to the new revision as NAME (repeatable); the document's other attachments stay.",
        valueName: "name=path"))
    var attachments: [String] = []

    func validate() throws {
        for a in attachments where Self.splitAttachment(a) == nil {
            throw ValidationError("--attach takes NAME=PATH, got \(a.debugDescription)")
        }
    }

    /// `NAME=PATH` split at the first `=`; nil when either side is empty.
    static func splitAttachment(_ s: String) -> (name: String, path: String)? {
        guard let eq = s.firstIndex(of: "="), eq != s.startIndex, s.index(after: eq) != s.endIndex else { return nil }
        return (String(s[..<eq]), String(s[s.index(after: eq)...]))
    }

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        do {
            var doc = try db.document(id, includeDeleted: true) ?? Document(id: id)
            // The new body keeps the attachments the current revision has (a tombstone has none).
            let kept = doc.isDeleted ? nil : doc.properties["_attachments"]
            doc.properties = try JSONParser.parseObject(Array(json.utf8))
            if doc.properties["_attachments"] == nil, let kept { doc.properties["_attachments"] = kept }
            for a in attachments {
                guard let (name, path) = Self.splitAttachment(a) else { continue }
                guard let bytes = FileManager.default.contents(atPath: path) else {
                    throw ValidationError("cannot read \(path)")
                }
                doc.setAttachment(name, blob: try db.writeBlob(Array(bytes)))
            }
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

/// `ferry revs`: prints a document's revision tree, newest first (CouchDB's `revs_info`).
struct Revs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a document's revision tree: each revision with its parent, newest first; * marks the current one.")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        guard let tree = try db.revisionTree(of: id) else {
            warn("ferry: no document \(id)")
            throw ExitCode(1)
        }
        let current = tree.current?.revisionID
        let leaves = Set(tree.leaves.map(\.revisionID))
        for node in tree.nodes.values.sorted(by: { $0.revisionID > $1.revisionID }) {
            var flags: [String] = []
            if node.revisionID == current { flags.append("current") }
            if leaves.contains(node.revisionID) { flags.append("leaf") }
            if node.isDeleted { flags.append("deleted") }
            if tree.remoteRevisions.values.contains(node.revisionID) { flags.append("pinned") }
            print("\(node.revisionID == current ? "*" : " ") \(node.revisionID)\t\(node.parent?.description ?? "-")\t\(flags.joined(separator: ","))")
        }
    }
}

/// `ferry ls`: lists documents with their current revisions.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List document IDs and current revisions.")
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Include deleted documents.") var deleted = false
    @Flag(help: """
        One JSON object a line, by ID: {"id","rev","deleted","body","conflicts":[rev…],"leaves":[{"rev","deleted","closed"}…]} \
        (what the cluster harness compares across peers).
        """)
    var json = false

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        var after: String?
        while true {
            let page = try db.allDocuments(after: after, limit: 1000, includeDeleted: deleted)
            guard let last = page.last else { break }
            if json {
                let trees = try db.revisionTrees(of: page.map(\.id))
                for d in page { print(String(decoding: CanonicalJSON.encode(Self.describe(d, tree: trees[d.id])), as: UTF8.self)) }
            } else {
                for d in page { print("\(d.id)\t\(d.revisionID?.description ?? "")\(d.isDeleted ? "\tdeleted" : "")") }
            }
            after = last.id
        }
    }

    /// A document with its tree's leaves and open conflicts, as `--json` prints it.
    static func describe(_ d: Document, tree: RevisionTree?) -> JSONValue {
        let leaves = tree?.leaves ?? []
        return .object([
            "id": .string(d.id), "rev": .string(d.revisionID?.description ?? ""), "deleted": .bool(d.isDeleted),
            "body": .object(d.properties),
            "conflicts": .array((tree?.conflicts ?? []).map { .string($0.description) }),
            "leaves": .array(leaves.map {
                .object(["rev": .string($0.revisionID.description), "deleted": .bool($0.isDeleted), "closed": .bool($0.isClosed)])
            }),
        ])
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
