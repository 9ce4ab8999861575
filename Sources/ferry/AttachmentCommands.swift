import ArgumentParser
import FerryStore
import FerrySync
import Foundation

/// `ferry attachment`: a document's attachments — list them, or print one, fetching it from a
/// peer first when a pull left it unfetched (`--download-rule … skip`).
struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment", abstract: "List a document's attachments, or print one (fetched from a peer on demand).",
        subcommands: [AttachmentList.self, AttachmentGet.self])
}

/// `ferry attachment ls DOC`: one line per attachment of the current revision.
struct AttachmentList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List a document's attachments: name, content type, length in bytes, fetched or unfetched.")
    @OptionGroup var database: DatabaseOption
    @Argument(help: "Document ID.") var id: String

    func run() async throws {
        let db = try database.open()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        for a in try db.attachments(of: doc) {
            print("\(a.name)\t\(a.contentType ?? "-")\t\(a.length)\t\(a.isFetched ? "fetched" : "unfetched")")
        }
    }
}

/// `ferry attachment get DOC NAME`: the attachment's bytes, exactly, on standard output or in
/// a file.
struct AttachmentGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an attachment's bytes to standard output (or --output), first fetching it from --peer if it is unfetched here.")
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
        let db = try database.open()
        defer { db.close() }
        let doc = try existingDocument(id, in: db)
        guard let attachment = try db.attachments(of: doc).first(where: { $0.name == name }) else {
            warn("ferry: \(id) has no attachment \(name)")
            throw ExitCode(1)
        }
        if !attachment.isFetched { try await fetch(into: db) }
        let reader: BlobReader
        do { reader = try db.readBlob(digest: attachment.digest) } catch {
            warn("ferry: cannot read \(name) of \(id): \(error)")
            throw ExitCode(1)
        }
        defer { reader.close() }
        let out: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil), let h = FileHandle(forWritingAtPath: output) else {
                warn("ferry: cannot write \(output)")
                throw ExitCode(1)
            }
            out = h
        } else {
            out = FileHandle.standardOutput
        }
        defer { if output != nil { try? out.close() } }
        for try await chunk in reader { try out.write(contentsOf: chunk) }
    }

    /// Fetches the attachment from `--peer`, or fails saying how to.
    private func fetch(into db: Database) async throws {
        guard let peer else {
            warn("ferry: attachment \(name) of \(id) is not fetched here (a download rule skipped it); give --peer URL to fetch it")
            throw ExitCode(1)
        }
        var c = ReplicatorConfiguration(database: db, target: peer)
        c.type = .pull
        c.tls = tls.configuration
        do { try await Replicator(configuration: c).fetchAttachment(named: name, documentID: id) } catch {
            warn("ferry: cannot fetch \(name) of \(id) from \(Sync.redacted(peer)): \(error)")
            throw ExitCode(1)
        }
    }
}
