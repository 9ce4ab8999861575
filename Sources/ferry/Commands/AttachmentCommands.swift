import ArgumentParser
import FerryStore
import FerrySync
import FoundationEssentials
import Glibc

/// `ferry attachment`: a document's attachments — list them, or print one, fetching it from a
/// peer first when a pull left it unfetched (`--download-rule … skip`).
struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment", abstract: "List, print or remove a document's attachments (fetched from a peer on demand).",
        discussion: """
        Add attachments with ferry put --attach NAME=PATH[:TYPE].

        Example:
          ferry attachment ls --db tasks.db report
          ferry attachment get --db tasks.db report summary.txt -o summary.txt
          ferry attachment rm --db tasks.db report summary.txt
        """,
        subcommands: [AttachmentList.self, AttachmentGet.self, AttachmentRemove.self])
}

/// `ferry attachment ls DOC`: one line per attachment of the current revision.
struct AttachmentList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List a document's attachments: name, content type, length in bytes, fetched or unfetched.",
        discussion: """
        --json prints one JSON object a line: {"name","content_type","length","digest","revpos","fetched"}.

        Example:
          ferry attachment ls --db tasks.db report
          ferry attachment ls --db tasks.db report --json | jq -r .name
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Option(help: ArgumentHelp("The attachments of this revision instead of the current one.", valueName: "rev")) var rev: String?
    @Flag(help: "One JSON object a line.") var json = false

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        let doc = try rev.map { try namedRevision($0, of: id, in: db) } ?? existingDocument(id, in: db)
        for a in try db.attachments(of: doc) {
            if json {
                let o: JSONValue = .object([
                    "name": .string(a.name), "content_type": a.contentType.map { JSONValue.string($0) } ?? .null, "length": .int(a.length),
                    "digest": .string(a.digest.description), "revpos": a.revpos.map { JSONValue.int(Int64($0)) } ?? .null, "fetched": .bool(a.isFetched),
                ])
                print(String(decoding: CanonicalJSON.encode(o), as: UTF8.self))
            } else {
                print("\(a.name)\t\(a.contentType ?? "-")\t\(a.length)\t\(a.isFetched ? "fetched" : "unfetched")")
            }
        }
    }
}

/// `ferry attachment get DOC NAME`: the attachment's bytes, exactly, on standard output or in
/// a file.
struct AttachmentGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an attachment's bytes to standard output (or --output), first fetching it from --peer if it is unfetched here.",
        discussion: """
        Example:
          ferry attachment get --db tasks.db report summary.txt
          ferry attachment get report data.bin --peer ws://naomi:4984/tasks -o data.bin
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Argument(help: "The attachment's name.") var name: String
    @Option(help: ArgumentHelp("The peer to fetch an unfetched attachment from, ws://host:port/db or wss://host:port/db.",
                               valueName: "url"))
    var peer: String?
    @Option(name: [.short, .long], help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?
    @OptionGroup(title: "TLS (wss:// peers)") var tls: ClientTLSOptions

    func run() async throws {
        // A reader that goes away (`| head`) is a write error here, not a signal that kills us.
        signal(SIGPIPE, SIG_IGN)
        let db = try database.openExisting()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        guard let attachment = try db.attachments(of: doc).first(where: { $0.name == name }) else {
            throw CommandFailure("\(id) has no attachment \(name)")
        }
        if !attachment.isFetched { try await fetch(into: db) }
        let reader: BlobReader
        do { reader = try db.readBlob(digest: attachment.digest) } catch {
            throw CommandFailure("cannot read \(name) of \(id): \(error)")
        }
        defer { reader.close() }
        let out = try OutputFile(path: output)
        for try await chunk in reader { try out.write(Array(chunk)) }
    }

    /// Fetches the attachment from `--peer`, or fails saying how to.
    private func fetch(into db: Database) async throws {
        guard let peer else {
            throw CommandFailure("attachment \(name) of \(id) is not fetched here (a download rule skipped it); give --peer URL to fetch it")
        }
        var c = ReplicatorConfiguration(database: db, target: peer)
        c.type = .pull
        c.tls = tls.configuration
        do { try await Replicator(configuration: c).fetchAttachment(named: name, documentID: id) } catch {
            throw CommandFailure("cannot fetch \(name) of \(id) from \(Sync.redacted(peer)): \(error)")
        }
    }
}

/// `ferry attachment rm DOC NAME`: a new revision of the document without that attachment.
struct AttachmentRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove an attachment: a new revision of the document without it (the removal replicates).",
        discussion: """
        Prints the new revision ID. The attachment's file stays on disk while an older revision \
        still names it, and goes at the next ferry compact once none does.

        Example:
          ferry attachment rm --db tasks.db report summary.txt
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String
    @Argument(help: "The attachment's name.") var name: String

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        var doc = try existingDocument(id, in: db)
        guard doc.properties["_attachments"]?.objectValue?[name] != nil else {
            throw CommandFailure("\(id) has no attachment \(name)")
        }
        doc.removeAttachment(name)
        do { print(try db.save(doc, concurrencyControl: .failOnConflict).revisionID?.description ?? "") } catch {
            throw CommandFailure("cannot save \(id): \(error)")
        }
    }
}
