import ArgumentParser
import FerryStore
import Foundation

/// `ferry query`: documents by type and field predicates (`Database.documents(matching:)`,
/// docs/store.md §8), current revisions in ID order.
struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Find documents by type and field conditions.",
        discussion: """
        --where FIELD OP VALUE, repeatable (all must hold). FIELD is a dotted path into the body \
        (address.city); OP is one of = != < <= > >=; VALUE is JSON when it parses as a JSON \
        number, true, false, null or "quoted string", else the text itself (so status=done and \
        status="done" are the same). FIELD=null matches JSON null, FIELD!=null a present, \
        non-null value. --exists FIELD: the field is present. --type T is --where type=T on \
        the database's type key, served by its index. Values compare as SQLite's json_extract \
        gives them (true is 1); arrays and objects cannot be compared.

        Prints ID and current revision a line; --json prints each document as ferry get does, \
        one a line.

        Example:
          ferry query --db tasks.db --type task --where done=false
          ferry query --db tasks.db --where 'prio>=2' --where owner.name=molly
          ferry query --db tasks.db --type task --limit 10 --json
        """)
    @OptionGroup var database: DatabaseOption
    @Option(help: ArgumentHelp("Documents of this type (the type key, default \"type\").", valueName: "type")) var type: String?
    @Option(name: .customLong("where"), help: ArgumentHelp("A condition FIELD OP VALUE, OP one of = != < <= > >= (repeatable).",
                                                          valueName: "condition"))
    var conditions: [String] = []
    @Option(help: ArgumentHelp("The field is present (repeatable).", valueName: "field")) var exists: [String] = []
    @Option(help: ArgumentHelp("At most this many documents.", valueName: "n")) var limit: Int?
    @Flag(help: "Include deleted documents (tombstones that kept fields).") var deleted = false
    @Flag(help: "Print each document as JSON with _id and _rev, one a line.") var json = false

    func validate() throws {
        if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        for c in conditions where Self.predicate(c) == nil {
            throw ValidationError("--where takes FIELD OP VALUE with OP one of = != < <= > >=, got \(c.debugDescription)")
        }
        if type == nil && conditions.isEmpty && exists.isEmpty {
            throw ValidationError("give --type, --where or --exists (ferry ls lists every document)")
        }
    }

    /// `field OP value` → a predicate, split at the first operator character; nil when there
    /// is no operator or no field.
    static func predicate(_ condition: String) -> FerryStore.Predicate? {
        guard let at = condition.firstIndex(where: { "!<>=".contains($0) }) else { return nil }
        let next = condition.index(after: at)
        let two = next < condition.endIndex && condition[next] == "=" && condition[at] != "="
        let op = two ? String(condition[at...next]) : String(condition[at])
        guard op != "!" else { return nil }
        let field = condition[..<at].trimmingCharacters(in: .whitespaces)
        let text = String(condition[(two ? condition.index(after: next) : next)...]).trimmingCharacters(in: .whitespaces)
        guard !field.isEmpty else { return nil }
        let value = literal(text)
        switch (op, value) {
        case ("=", .null): return .isNull(field)
        case ("!=", .null): return .and([.exists(field), .not(.isNull(field))])
        case ("=", _): return .equal(field, value)
        case ("!=", _): return .notEqual(field, value)
        case ("<", _): return .less(field, value)
        case ("<=", _): return .lessOrEqual(field, value)
        case (">", _): return .greater(field, value)
        default: return .greaterOrEqual(field, value)
        }
    }

    /// A JSON scalar when the text is one, else the text as a string.
    static func literal(_ text: String) -> JSONValue {
        if let v = try? JSONParser.parse(Array(text.utf8)) {
            switch v {
            case .array, .object: return .string(text)
            default: return v
            }
        }
        return .string(text)
    }

    func run() async throws {
        let db = try database.openExisting()
        defer { db.close() }
        var parts: [FerryStore.Predicate] = []
        if let type { parts.append(.equal(db.options.typeKey, .string(type))) }
        parts += conditions.compactMap(Self.predicate)
        parts += exists.map { .exists($0) }
        let predicate = parts.count == 1 ? parts[0] : .and(parts)
        var after: String?
        var left = limit ?? .max
        do {
            while left > 0 {
                let page = try db.documents(matching: predicate, after: after, limit: min(left, 1000), includeDeleted: deleted)
                guard let last = page.last else { break }
                for d in page {
                    if json {
                        var props = d.properties
                        props["_id"] = .string(d.id)
                        props["_rev"] = .string(d.revisionID?.description ?? "")
                        if d.isDeleted { props["_deleted"] = .bool(true) }
                        print(String(decoding: CanonicalJSON.encode(.object(props)), as: UTF8.self))
                    } else {
                        print("\(d.id)\t\(d.revisionID?.description ?? "")\(d.isDeleted ? "\tdeleted" : "")")
                    }
                }
                left -= page.count
                after = last.id
            }
        } catch {
            throw CommandFailure("cannot query: \(error)")
        }
    }
}
