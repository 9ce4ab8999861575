import ArgumentParser
import FerryServer
import FoundationEssentials

/// `ferry db create|rm|ls --data DIR`: the databases of a data directory, without a running
/// daemon (a running one serves a new file at its first request; use its REST API, `PUT /NAME`
/// and `DELETE /NAME`, to delete while it runs).
struct DatabaseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db", abstract: "Create, delete and list the databases of a data directory.",
        subcommands: [Create.self, Remove.self, ListDatabases.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a database (CouchDB's naming rule: ^[a-z][a-z0-9_$()+/-]*$).")
        @Option(help: ArgumentHelp("The data directory.", valueName: "dir")) var data: String
        @Argument(help: "Database name.") var name: String

        func run() throws {
            let registry = try DatabaseRegistry(location: .directory(data))
            defer { registry.closeAll() }
            do { _ = try registry.create(name) } catch { throw ValidationError(error.reason) }
            print("ferry: created \(name)")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a database and its attachments (stop the daemon first).")
        @Option(help: ArgumentHelp("The data directory.", valueName: "dir")) var data: String
        @Argument(help: "Database name.") var name: String

        func run() throws {
            let registry = try DatabaseRegistry(location: .directory(data))
            defer { registry.closeAll() }
            do { try registry.delete(name) } catch { throw ValidationError(error.reason) }
            print("ferry: deleted \(name)")
        }
    }

    struct ListDatabases: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the databases with their document counts.")
        @Option(help: ArgumentHelp("The data directory.", valueName: "dir")) var data: String

        func run() throws {
            let registry = try DatabaseRegistry(location: .directory(data))
            defer { registry.closeAll() }
            for (name, db) in registry.all.sorted(by: { $0.key < $1.key }) {
                print("\(name)\t\((try? db.documentCount()) ?? 0) documents\tsequence \(db.lastSequence)")
            }
        }
    }
}
