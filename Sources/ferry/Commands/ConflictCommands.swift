import ArgumentParser
import FerryStore
import FoundationEssentials

/// `ferry conflicts`: the documents whose trees have more than one live leaf.
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List conflicted documents: ID, winning revision, conflicting revisions.",
        discussion: """
        A document is in conflict when its revision tree has live leaves besides the current \
        (winning) one. A replication resolves the conflicts it pulls by the default rule or its \
        resolver; conflicts that stay (a custom resolver that declined by throwing, revisions \
        inserted through the library with resolver: nil) are listed here until ferry resolve settles them. --json prints one \
        JSON object a line: {"id","rev","conflicts":[rev…]}.

        Example:
          ferry conflicts --db tasks.db
          ferry conflicts --db tasks.db --json | jq -r .id
        """)
    @OptionGroup var database: DatabaseOption
    @Flag(help: "One JSON object a line: {\"id\",\"rev\",\"conflicts\":[rev…]}.") var json = false

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        let ids = try db.conflictedDocumentIDs()
        if ids.isEmpty && !json { print("No conflicted documents."); return }
        for id in ids {
            guard let tree = try db.revisionTree(of: id), let current = tree.current else { continue }
            if json {
                let o: JSONValue = .object(["id": .string(id), "rev": .string(current.revisionID.description),
                                            "conflicts": .array(tree.conflicts.map { JSONValue.string($0.description) })])
                print(String(decoding: CanonicalJSON.encode(o), as: UTF8.self))
            } else {
                print("\(id)\t\(current.revisionID)\t\(tree.conflicts.map(\.description).joined(separator: ","))")
            }
        }
    }
}

/// `ferry resolve ID --keep REV | --merge FILE`: settles a conflict from the shell with the
/// store's resolution (`Database.resolveConflict`), so the result replicates like any other
/// change.
struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resolve a document's conflict: keep one leaf (--keep REV) or write a merged body (--merge FILE).",
        discussion: """
        --keep REV: that leaf wins as it is and every other live leaf is closed. --merge FILE: a \
        new revision with FILE's JSON object as its body (FILE - reads standard input) continues \
        the higher of two leaves, and every other live leaf is closed. Prints the document's \
        current revision afterwards.

        The store resolves as a replicator does (docs/store.md, section 4): it only adds \
        revisions — a losing leaf is closed by a tombstone child, never removed — so any peer, \
        Ferry or CouchDB, reading the result picks the same winner. Run ferry sync afterwards \
        to send the resolution.

        Example:
          ferry conflicts --db tasks.db
          ferry get --db tasks.db task-1 --revs
          ferry resolve --db tasks.db task-1 --keep 2-7718b032
          ferry resolve --db tasks.db task-1 --merge merged.json
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Option(help: ArgumentHelp("Keep this leaf's content.", valueName: "rev")) var keep: String?
    @Option(help: ArgumentHelp("Write this file's JSON object as the resolution (- for standard input).", valueName: "file"))
    var merge: String?

    func validate() throws {
        if (keep == nil) == (merge == nil) { throw ValidationError("give one of --keep REV and --merge FILE") }
    }

    func run() async throws {
        var body: [String: JSONValue]?
        if let merge { body = try Self.readObject(merge) }
        let db = try database.openExisting()
        defer { db.close() }
        guard let tree = try db.revisionTree(of: id) else { throw CommandFailure("no document \(id)") }
        guard !tree.conflicts.isEmpty else { throw CommandFailure("\(id) has no conflicts (ferry revs \(id) shows its tree)") }
        var kept: RevisionID?
        if let keep {
            let rev: RevisionID
            do { rev = try RevisionID(keep) } catch { throw CommandFailure("\(keep.debugDescription) is not a revision ID (generation-hexdigest)") }
            guard tree.isLeaf(rev) else {
                let leaves = tree.leaves.map(\.revisionID.description).joined(separator: ", ")
                throw CommandFailure("\(keep) is not a leaf of \(id) (its leaves: \(leaves))")
            }
            kept = rev
        }
        let result: RevisionID?
        do {
            if let kept {
                result = try Self.keep(kept, of: id, in: db)
            } else {
                result = try Self.merge(body ?? [:], into: id, tree: tree, in: db)
            }
        } catch {
            throw CommandFailure("cannot resolve \(id): \(error)")
        }
        print(result?.description ?? "")
    }

    /// A file's (or standard input's) JSON object, or `Error: …`.
    static func readObject(_ path: String) throws -> [String: JSONValue] {
        let data: [UInt8]?
        if path == "-" { data = StandardInput.readAll() } else { data = FileManager.default.contents(atPath: path).map { Array($0) } }
        guard let data else { throw CommandFailure("cannot read \(path) (\(FileManager.default.fileExists(atPath: path) ? "not readable" : "no such file"))") }
        do { return try JSONParser.parseObject(data) } catch {
            throw CommandFailure("\(path) is not a JSON object: \(error)")
        }
    }

    /// The live leaves of a tree other than `rev`, highest first.
    static func otherLiveLeaves(_ tree: RevisionTree, than rev: RevisionID) -> [RevisionID] {
        tree.leaves.filter { !$0.isDeleted && $0.revisionID != rev }.map(\.revisionID)
    }

    /// Makes leaf `rev` win: every other live leaf is closed (Protocol/revisions.md, "Storing a
    /// resolution"); returns the current revision.
    static func keep(_ rev: RevisionID, of id: String, in db: Database) throws(StoreError) -> RevisionID? {
        while let tree = try db.revisionTree(of: id), let other = otherLiveLeaves(tree, than: rev).first {
            try db.resolveConflict(documentID: id, local: other, remote: rev, using: .custom { _ in .remote })
        }
        return try db.revisionTree(of: id)?.current?.revisionID
    }

    /// Writes `body` as a new revision continuing the higher of two live leaves and closes
    /// every other live leaf.
    static func merge(_ body: [String: JSONValue], into id: String, tree: RevisionTree, in db: Database) throws(StoreError) -> RevisionID? {
        guard let current = tree.current?.revisionID, let first = otherLiveLeaves(tree, than: current).first,
              let merged = try db.resolveConflict(documentID: id, local: first, remote: current, using: .custom { _ in .merged(body) })
        else { throw .invalidArgument("the merge made no revision") }
        return try keep(merged, of: id, in: db)
    }
}
