import ArgumentParser
import FerryStore
import FerrySync
import FoundationEssentials

/// `ferry purge ID [--rev R]`: removes a document (or one leaf's branch) without a tombstone.
struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove a document, or one leaf revision, without a trace (nothing replicates).",
        discussion: """
        Unlike ferry delete, no tombstone is written: the document is gone here as if it had \
        never existed, and peers keep their copies (a peer that still has it may send it again). \
        --rev removes one leaf and its branch back to the fork with another branch; the \
        document goes when that was its only branch. Prints the current revision afterwards \
        (nothing when the document is gone). Attachments' files go at the next ferry compact.

        Example:
          ferry purge --db tasks.db task-1
          ferry purge --db tasks.db task-1 --rev 2-7718b032
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Option(help: ArgumentHelp("Remove only this leaf revision (and its branch).", valueName: "rev")) var rev: String?

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        guard let tree = try db.revisionTree(of: id) else { throw CommandFailure("no document \(id)") }
        var revision: RevisionID?
        if let rev {
            let r: RevisionID
            do { r = try RevisionID(rev) } catch { throw CommandFailure("\(rev.debugDescription) is not a revision ID (generation-hexdigest)") }
            guard tree.isLeaf(r) else {
                throw CommandFailure(tree.nodes[r] == nil
                    ? "\(id) has no revision \(rev) (ferry revs \(id) lists them)"
                    : "\(rev) is not a leaf of \(id) (only leaves can be purged; its leaves: \(tree.leaves.map(\.revisionID.description).joined(separator: ", ")))")
            }
            revision = r
        }
        let current: RevisionID?
        do {
            if let revision {
                current = try db.purge(id, revision: revision)
            } else {
                try db.purge(id)
                current = nil
            }
        } catch {
            throw CommandFailure("cannot purge \(id): \(error)")
        }
        if let current { print(current.description) } else { warn("ferry: purged \(id)") }
    }
}

/// `ferry compact`: the store's compaction (unreferenced attachment blobs and stale temp files
/// go), with the bytes on disk before and after.
struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete attachment files no revision references any more; print the bytes on disk before and after.",
        discussion: """
        FerryStore keeps attachments as files beside the database (PATH.attachments/); a file \
        stays after the last revision naming it is purged, resolved away or overwritten, until \
        a compaction. Document revisions need no compaction: the store keeps bodies only for \
        leaves and peers' latest revisions and prunes trees as it writes. The sizes counted are \
        the database file, its WAL and the attachment folder.

        Example:
          ferry compact --db tasks.db
        """)
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Print one JSON object.") var json = false

    func run() async throws {
        let before = DiskUsage(database: database.db)
        let db = try database.openExisting()
        let result: CompactionResult
        do { result = try db.compact() } catch {
            db.close()
            throw CommandFailure("cannot compact \(database.db): \(error)")
        }
        db.close()
        let after = DiskUsage(database: database.db)
        if json {
            let o: JSONValue = .object([
                "blobs_removed": .int(Int64(result.blobsRemoved)), "bytes_freed": .int(result.bytesFreed),
                "temp_files_removed": .int(Int64(result.tempFilesRemoved)),
                "bytes_before": .int(before.total), "bytes_after": .int(after.total),
            ])
            print(String(decoding: CanonicalJSON.encode(o), as: UTF8.self))
            return
        }
        print("removed \(result.blobsRemoved) unreferenced attachment file\(result.blobsRemoved == 1 ? "" : "s") (\(HumanFormat.bytes(result.bytesFreed)))"
              + (result.tempFilesRemoved > 0 ? " and \(result.tempFilesRemoved) temporary file\(result.tempFilesRemoved == 1 ? "" : "s")" : ""))
        print("on disk: \(HumanFormat.bytes(before.total)) before, \(HumanFormat.bytes(after.total)) after (\(before.total) → \(after.total) bytes)")
    }
}

/// The bytes a database occupies: its file, WAL, and attachment folder (`.blob` files).
struct DiskUsage {
    var file: Int64 = 0
    var wal: Int64 = 0
    var attachments: Int64 = 0
    var attachmentFiles = 0
    var total: Int64 { file + wal + attachments }

    init(database path: String) {
        let fm = FileManager.default
        file = FileSystem.size(atPath: path)
        wal = FileSystem.size(atPath: path + "-wal")
        let folder = path + ".attachments"
        for name in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] where name.hasSuffix(".blob") {
            attachments += FileSystem.size(atPath: folder + "/" + name)
            attachmentFiles += 1
        }
    }
}

/// `ferry info`: counts, sequence, sizes and the replication checkpoints a database holds.
struct Info: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a database's document counts, update sequence, sizes and replication checkpoints.",
        discussion: """
        Checkpoints: where each replication with a peer stands — kept by this database's \
        replicator (ferry sync, --replicate: the pushed local sequence and the pulled peer \
        sequence, with the peer's URL when it is known) and for each client that replicated \
        with this database while it served.

        Example:
          ferry info --db tasks.db
          ferry info --db tasks.db --json | jq .update_seq
        """)
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Print one JSON object.") var json = false

    /// A peer URL with any password replaced by `***`.
    static func redacted(_ url: String) -> String {
        guard var c = URLComponents(string: url), c.password != nil else { return url }
        c.password = "***"
        return c.string ?? url
    }

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        let disk = DiskUsage(database: database.db)
        let live: Int, all: Int, conflicted: Int, checkpoints: [ReplicationCheckpoint]
        do {
            live = try db.documentCount()
            all = try db.documentCount(includeDeleted: true)
            conflicted = try db.conflictedDocumentIDs().count
            checkpoints = try ReplicationCheckpoint.all(in: db)
        } catch {
            throw CommandFailure("cannot read \(database.db): \(error)")
        }
        if json {
            let o: JSONValue = .object([
                "path": .string(database.db), "uuid": .string(db.uuid.uuidString),
                "documents": .int(Int64(live)), "deleted": .int(Int64(all - live)), "conflicted": .int(Int64(conflicted)),
                "update_seq": .int(db.lastSequence),
                "file_size": .int(disk.file + disk.wal),
                "attachments": .object(["files": .int(Int64(disk.attachmentFiles)), "size": .int(disk.attachments)]),
                "checkpoints": .array(checkpoints.map { c in
                    .object(["side": .string(c.side.rawValue), "id": .string(c.id), "peer": c.peer.map { JSONValue.string(Self.redacted($0)) } ?? .null,
                             "local": c.local.map { JSONValue.int($0) } ?? .null, "remote": c.remote ?? .null, "rev": .string(c.revision)])
                }),
            ])
            print(String(decoding: CanonicalJSON.encode(o), as: UTF8.self))
            return
        }
        print("database:     \(database.db)")
        print("uuid:         \(db.uuid.uuidString)")
        print("documents:    \(HumanFormat.count(live)) (\(HumanFormat.count(all - live)) deleted, \(HumanFormat.count(conflicted)) conflicted)")
        print("update seq:   \(db.lastSequence)")
        print("file size:    \(HumanFormat.bytes(disk.file + disk.wal)) (\(disk.file + disk.wal) bytes)")
        print("attachments:  \(HumanFormat.count(disk.attachmentFiles)) files, \(HumanFormat.bytes(disk.attachments)) (\(disk.attachments) bytes)")
        if checkpoints.isEmpty {
            print("checkpoints:  none")
        } else {
            print("checkpoints:")
            for c in checkpoints {
                let remote = c.remote.map { String(decoding: CanonicalJSON.encode($0), as: UTF8.self) } ?? "-"
                let local = c.local.map { "\($0)" } ?? "-"
                if c.side == .replicator {
                    print("  with \(c.peer.map(Self.redacted) ?? "a peer (\(c.id))"): pushed up to our seq \(local), pulled up to its seq \(remote)")
                } else {
                    print("  for client \(c.id): it pushed up to its seq \(local), pulled up to our seq \(remote)")
                }
            }
        }
    }
}
