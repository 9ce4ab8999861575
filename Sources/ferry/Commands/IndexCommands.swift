import ArgumentParser
import FerryStore
import FoundationEssentials

/// `ferry index add|ls|rm`: Mango indexes, kept as CouchDB keeps them (design documents
/// whose `language` is `"query"`, so they replicate), as `POST/GET/DELETE /{db}/_index` do.
struct IndexCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "index",
        abstract: "Add, list and remove Mango indexes (CouchDB's _index).",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a json index on one or more fields.",
            discussion: """
            FIELD is a dotted path, FIELD:desc a descending column (CouchDB ignores the \\
            direction for the entries). Without --name and --ddoc both are a digest of the \\
            definition, as CouchDB names them. The index is built at the first query that uses \\
            it and kept by every write after.

            Example:
              ferry index add --db tasks.db type prio
              ferry index add --db tasks.db due --name by-due --partial '{"done":false}'
            """)
        @OptionGroup var database: DatabaseOption
        @Argument(help: ArgumentHelp("The columns, in order.", valueName: "field")) var fields: [String]
        @Option(help: "The index's name.") var name: String?
        @Option(help: "Its design document (with or without _design/).") var ddoc: String?
        @Option(help: ArgumentHelp("Only documents matching this selector are indexed.", valueName: "selector")) var partial: String?

        func run() async throws {
            let sortJSON: JSONValue = .array(fields.map { f in
                f.hasSuffix(":desc") ? .object([String(f.dropLast(5)): "desc"]) : .string(f.hasSuffix(":asc") ? String(f.dropLast(4)) : f)
            })
            let index: MangoIndex
            do {
                let sort = try MangoSort(json: sortJSON)
                guard !sort.fields.isEmpty else { throw MangoError("missing_required_key", "give at least one field") }
                let partialFilter = try partial.map { (p: String) throws -> JSONValue in
                    try MangoSelector(json: try JSONParser.parse(Array(p.utf8), sizeLimit: 1 << 20)).json
                }
                index = MangoIndex(fields: sort.fields, partialFilter: partialFilter, name: name, designDocument: ddoc)
            } catch {
                throw ValidationError("\(error)")
            }
            let db = try database.openExisting()
            defer { db.close() }
            do {
                let created = try db.createMangoIndex(index)
                print("\(created ? "created" : "exists")\t\(index.designDocument ?? "")\t\(index.name)")
            } catch {
                throw CommandFailure("cannot add the index: \(error)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List the indexes: design document, name, type, definition.")
        @OptionGroup var database: DatabaseOption

        func run() async throws {
            let db = try database.openExisting()
            defer { db.close() }
            do {
                for i in try db.mangoIndexes() {
                    print("\(i.designDocument ?? "-")\t\(i.name)\t\(i.type)\t\(String(decoding: CanonicalJSON.encode(i.definition), as: UTF8.self))")
                }
            } catch {
                throw CommandFailure("cannot list the indexes: \(error)")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove an index (its design document goes with its last index).")
        @OptionGroup var database: DatabaseOption
        @Argument(help: "The design document (with or without _design/).") var ddoc: String
        @Argument(help: "The index's name.") var name: String

        func run() async throws {
            let db = try database.openExisting()
            defer { db.close() }
            let id = ddoc.hasPrefix("_design/") ? ddoc : "_design/" + ddoc
            let removed: Bool
            do { removed = try db.deleteMangoIndex(designDocument: id, name: name) } catch {
                throw CommandFailure("cannot remove the index: \(error)")
            }
            guard removed else { throw CommandFailure("no index \(name) in \(id)") }
        }
    }
}
