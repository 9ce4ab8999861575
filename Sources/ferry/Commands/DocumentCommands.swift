import ArgumentParser
import FerryStore
import FoundationEssentials

/// `ferry put`: saves a document (creating or updating its current revision).
struct Put: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save a document: a new revision on top of the current one (creates the database if missing).",
        discussion: """
        The body is a JSON object. --attach adds a file as an attachment of the new revision (the \
        document's other attachments stay); :TYPE after the path sets its content type.

        Example:
          ferry put --db tasks.db task-1 '{"type":"task","title":"milk","done":false}'
          ferry put report '{"title":"Q3"}' --attach notes=./notes.txt:text/plain
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Argument(help: "The document body, a JSON object.") var json: String
    @Option(name: .customLong("attach"), help: ArgumentHelp(
        "Attach a file to the new revision as NAME (repeatable), with content type TYPE if given; the document's other attachments stay.",
        valueName: "name=path[:type]"))
    var attachments: [String] = []

    func validate() throws {
        for a in attachments where Self.splitAttachment(a) == nil {
            throw ValidationError("--attach takes NAME=PATH[:TYPE], got \(a.debugDescription)")
        }
    }

    /// `NAME=PATH[:TYPE]` split at the first `=`; nil when either side is empty. A `:TYPE`
    /// suffix is taken as the content type when it has the shape of one (`text/plain`), so a
    /// path with a colon elsewhere stays a path.
    static func splitAttachment(_ s: String) -> (name: String, path: String, type: String?)? {
        guard let eq = s.firstIndex(of: "="), eq != s.startIndex, s.index(after: eq) != s.endIndex else { return nil }
        let name = String(s[..<eq])
        let rest = String(s[s.index(after: eq)...])
        if let colon = rest.lastIndex(of: ":"), colon != rest.startIndex {
            let type = String(rest[rest.index(after: colon)...])
            let parts = type.split(separator: "/", omittingEmptySubsequences: false)
            let token = { (p: Substring) in !p.isEmpty && p.allSatisfy { $0.isLetter || $0.isNumber || "!#$&^_.+-".contains($0) } }
            if parts.count == 2, token(parts[0]), token(parts[1]) { return (name, String(rest[..<colon]), type) }
        }
        return (name, rest, nil)
    }

    func run() async throws {
        let body: [String: JSONValue]
        do { body = try JSONParser.parseObject(Array(json.utf8)) } catch {
            throw CommandFailure("the body of \(id) is not a JSON object: \(error)")
        }
        // Attachment files are read before anything is written, so a missing one saves nothing.
        var files: [(name: String, type: String?, bytes: [UInt8])] = []
        for a in attachments {
            guard let (name, path, type) = Self.splitAttachment(a) else { continue }
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw CommandFailure("cannot read attachment file \(path) (\(FileManager.default.fileExists(atPath: path) ? "not readable" : "no such file"))")
            }
            files.append((name, type, Array(bytes)))
        }
        let db = try database.open()
        defer { db.close() }
        do {
            var doc = try db.document(id, includeDeleted: true) ?? Document(id: id)
            // The new body keeps the attachments the current revision has (a tombstone has none).
            let kept = doc.isDeleted ? nil : doc.properties["_attachments"]
            doc.properties = body
            if doc.properties["_attachments"] == nil, let kept { doc.properties["_attachments"] = kept }
            for f in files { doc.setAttachment(f.name, blob: try db.writeBlob(f.bytes), contentType: f.type) }
            let saved = try db.save(doc)
            print(saved.revisionID?.description ?? "")
        } catch {
            throw CommandFailure("cannot save \(id): \(error)")
        }
    }
}

/// `ferry get`: prints a document's current revision (or one named revision, or its tree).
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a document as JSON with _id and _rev; --rev for another revision, --revs for the revision tree.",
        discussion: """
        --rev prints any revision whose body the store keeps: every leaf (conflicting and deleted \
        ones too) and each peer's latest revision; a tombstone prints with "_deleted":true. \
        --revs prints the revision tree (as ferry revs does); with --json as one JSON object.

        Example:
          ferry get --db tasks.db task-1
          ferry get --db tasks.db task-1 --rev 2-7718b032
          ferry get --db tasks.db task-1 --revs --json | jq .conflicts
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Option(help: ArgumentHelp("Print this revision instead of the current one.", valueName: "rev")) var rev: String?
    @Flag(help: "Print the revision tree instead of a body.") var revs = false
    @Flag(help: "JSON output (a body is JSON already; with --revs, the tree as one JSON object).") var json = false

    func validate() throws {
        if rev != nil && revs { throw ValidationError("--rev and --revs exclude each other") }
    }

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        if revs { return try RevisionTreeOutput.print(id, in: db, json: json) }
        let doc: Document
        if let rev {
            doc = try namedRevision(rev, of: id, in: db)
        } else {
            doc = try existingDocument(id, in: db)
        }
        print(String(decoding: CanonicalJSON.encode(.object(doc.jsonObject)), as: UTF8.self))
    }
}

/// `ferry delete`: deletes a document (a tombstone that replicates).
struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a document (the deletion replicates).",
        discussion: """
        Adds a tombstone on top of the current revision and prints its revision ID. To remove a \
        document without a trace (nothing replicates), use ferry purge.

        Example:
          ferry delete --db tasks.db task-1
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        do { print(try db.delete(doc).revisionID?.description ?? "") } catch {
            throw CommandFailure("cannot delete \(id): \(error)")
        }
    }
}

/// `ferry revs`: prints a document's revision tree, newest first (CouchDB's `revs_info`);
/// the same as `ferry get ID --revs`.
struct Revs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a document's revision tree: each revision with its parent, newest first; * marks the current one.",
        discussion: """
        One line per revision: a * for the current one, the revision ID (generation-digest), its \
        parent, and flags: current, leaf, conflict (a live leaf that lost to the current one), \
        deleted, closed (a branch a conflict resolution ended), pinned (a peer's latest \
        revision, kept with its body). The same as ferry get ID --revs.

        Example:
          ferry revs --db tasks.db task-1
          ferry revs --db tasks.db task-1 --json
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Flag(help: "Print the tree as one JSON object.") var json = false

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        try RevisionTreeOutput.print(id, in: db, json: json)
    }
}

/// A revision tree as `ferry revs` and `ferry get --revs` print it.
enum RevisionTreeOutput {
    static func print(_ id: String, in db: Database, json: Bool) throws {
        guard let tree = try db.revisionTree(of: id) else { throw CommandFailure("no document \(id)") }
        let current = tree.current?.revisionID
        let leaves = Set(tree.leaves.map(\.revisionID))
        let conflicts = Set(tree.conflicts)
        let pinned = Set(tree.remoteRevisions.values)
        let nodes = tree.nodes.values.sorted { $0.revisionID > $1.revisionID }
        if json {
            var revisions: [JSONValue] = []
            for n in nodes {
                var o: [String: JSONValue] = [:]
                o["rev"] = .string(n.revisionID.description)
                o["generation"] = .int(Int64(n.revisionID.generation))
                o["parent"] = n.parent.map { JSONValue.string($0.description) } ?? .null
                o["current"] = .bool(n.revisionID == current)
                o["leaf"] = .bool(leaves.contains(n.revisionID))
                o["conflict"] = .bool(conflicts.contains(n.revisionID))
                o["deleted"] = .bool(n.isDeleted)
                o["closed"] = .bool(n.isClosed)
                o["pinned"] = .bool(pinned.contains(n.revisionID))
                o["body"] = .bool(n.body != nil)
                revisions.append(.object(o))
            }
            var top: [String: JSONValue] = [:]
            top["id"] = .string(id)
            top["current"] = current.map { JSONValue.string($0.description) } ?? .null
            top["deleted"] = .bool(tree.current?.isDeleted ?? false)
            top["conflicts"] = .array(tree.conflicts.map { JSONValue.string($0.description) })
            top["revisions"] = .array(revisions)
            let object = JSONValue.object(top)
            Swift.print(String(decoding: CanonicalJSON.encode(object), as: UTF8.self))
            return
        }
        for node in nodes {
            var flags: [String] = []
            if node.revisionID == current { flags.append("current") }
            if leaves.contains(node.revisionID) { flags.append("leaf") }
            if conflicts.contains(node.revisionID) { flags.append("conflict") }
            if node.isClosed { flags.append("closed") } else if node.isDeleted { flags.append("deleted") }
            if pinned.contains(node.revisionID) { flags.append("pinned") }
            Swift.print("\(node.revisionID == current ? "*" : " ") \(node.revisionID)\t\(node.parent?.description ?? "-")\t\(flags.joined(separator: ","))")
        }
    }
}

/// `ferry ls`: lists documents with their current revisions.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List document IDs and current revisions.",
        discussion: """
        One line per document, by ID: ID, current revision, and "deleted" for a tombstone \
        (with --deleted). --json prints one JSON object a line instead.

        Example:
          ferry ls --db tasks.db
          ferry ls --db tasks.db --deleted --json | jq -r .id
        """)
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Include deleted documents.") var deleted = false
    @Flag(help: """
        One JSON object a line, by ID: {"id","rev","deleted","body","conflicts":[rev…],"leaves":[{"rev","deleted","closed"}…]} \
        (what the cluster harness compares across peers).
        """)
    var json = false

    func run() async throws {
        let db = try database.openExisting()
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
            "conflicts": .array((tree?.conflicts ?? []).map { JSONValue.string($0.description) }),
            "leaves": .array(leaves.map {
                .object(["rev": .string($0.revisionID.description), "deleted": .bool($0.isDeleted), "closed": .bool($0.isClosed)])
            }),
        ])
    }
}

/// The current revision of `id`: `Error: no document ID` (exit status 1) when there is none
/// or it is deleted.
func existingDocument(_ id: String, in db: Database) throws -> Document {
    guard let doc = try db.document(id) else {
        let deleted = try db.document(id, includeDeleted: true) != nil
        throw CommandFailure(deleted ? "\(id) is deleted" : "no document \(id)")
    }
    return doc
}

/// The revision `rev` of `id` with its body: `Error: …` (exit status 1) for a document that
/// does not exist, a malformed revision ID, a revision it does not have, or one whose body
/// was not kept.
func namedRevision(_ rev: String, of id: String, in db: Database) throws -> Document {
    let revision: RevisionID
    do { revision = try RevisionID(rev) } catch { throw CommandFailure("\(rev.debugDescription) is not a revision ID (generation-hexdigest)") }
    guard let tree = try db.revisionTree(of: id) else { throw CommandFailure("no document \(id)") }
    guard tree.nodes[revision] != nil else { throw CommandFailure("\(id) has no revision \(rev) (ferry revs \(id) lists them)") }
    guard let doc = try db.revision(revision, of: id) else {
        throw CommandFailure("the body of \(rev) of \(id) is not kept (only leaves and peers' latest revisions keep theirs)")
    }
    return doc
}
