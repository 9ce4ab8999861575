import ArgumentParser
import CJemalloc
import FerryNet
import FerryStore
import FoundationEssentials
import Glibc

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "A peer-to-peer JSON document replicator: serve a database, sync with peers, edit documents.",
        version: "ferry \(Ferry.version) (allocator: jemalloc \(String(cString: ferry_jemalloc_version())))",
        subcommands: [Serve.self, Sync.self, Put.self, Get.self, Delete.self, List.self, Revs.self, ConflictsCommand.self, Resolve.self,
                      QueryCommand.self, FindCommand.self, IndexCommand.self, Purge.self, Compact.self, Info.self, Export.self, Import.self, UserCommand.self,
                      DatabaseCommand.self, ReplicationCommand.self, PolicyCommand.self, AttachmentCommand.self, StatusCommand.self,
                      PeersCommand.self],
        defaultSubcommand: Serve.self)

    /// This build's version.
    static let version = "0.1.0"
}

/// `--db PATH`, shared by every command. `open()` creates a missing file (the commands that
/// write: `put`, `import`, `sync`, `serve`); `openExisting()` refuses one (every other
/// command: reading a database that is not there is a mistake, not an empty database).
struct DatabaseOption: ParsableArguments {
    @Option(name: .long, help: "The database file (put, import, sync and serve create it if missing; other commands need it to exist).")
    var db = "ferry.db"

    func open(watchExternalWrites: Bool = false) throws -> Database {
        var options = DatabaseOptions()
        options.watchExternalWrites = watchExternalWrites
        do { return try Database.open(at: db, options: options) } catch {
            throw CommandFailure("cannot open \(db): \(error)")
        }
    }

    /// Opens the database, or fails with `Error: no database at PATH` (exit status 1) when
    /// the file does not exist, instead of creating an empty one.
    func openExisting() throws -> Database {
        guard FileManager.default.fileExists(atPath: db) else {
            throw CommandFailure("no database at \(db) (give --db PATH; put, import and sync create one)")
        }
        return try open()
    }
}

/// Writes a line to standard error.
func warn(_ s: String) {
    Terminal.write(s + "\n", to: STDERR_FILENO)
}
