import ArgumentParser
import CJemalloc
import FerryNet
import FerryStore
import Foundation

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "A peer-to-peer JSON document replicator: serve a database, sync with peers, edit documents.",
        version: "ferry \(Ferry.version) (allocator: jemalloc \(String(cString: ferry_jemalloc_version())))",
        subcommands: [Serve.self, Sync.self, Put.self, Get.self, Delete.self, List.self, Revs.self, UserCommand.self, DatabaseCommand.self,
                      ReplicationCommand.self, PolicyCommand.self, AttachmentCommand.self, StatusCommand.self, PeersCommand.self],
        defaultSubcommand: Serve.self)

    /// This build's version.
    static let version = "0.1.0"
}

/// `--db PATH`, shared by every command.
struct DatabaseOption: ParsableArguments {
    @Option(name: .long, help: "The database file (created if missing).")
    var db = "ferry.db"

    func open(watchExternalWrites: Bool = false) throws -> Database {
        var options = DatabaseOptions()
        options.watchExternalWrites = watchExternalWrites
        do { return try Database.open(at: db, options: options) } catch {
            throw ValidationError("cannot open \(db): \(error)")
        }
    }
}

/// Writes a line to standard error.
func warn(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}
