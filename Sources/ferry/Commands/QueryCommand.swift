import ArgumentParser
import FerryStore
import FoundationEssentials

/// `ferry query`: documents by type and field conditions, a friendly spelling of a Mango
/// selector run by the same engine as `ferry find` and `_find` (`Database.find`), current
/// revisions in ID order (or an index's, when one serves the conditions).
struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Find documents by type and field conditions (Mango underneath).",
        discussion: """
        --where FIELD OP VALUE, repeatable (all must hold). FIELD is a dotted path into the body \
        (address.city); OP is one of = != < <= > >=; VALUE is JSON when it parses as a JSON \
        number, true, false, null or "quoted string", else the text itself (so status=done and \
        status="done" are the same). FIELD=null matches JSON null, FIELD!=null a present, \
        non-null value. --exists FIELD: the field is present. --type T is --where type=T on \
        the database's type key. Values compare as CouchDB's Mango compares them (its collation: \
        null < false < true < numbers < strings < arrays < objects; true is not 1). \
        --selector prints the Mango selector the conditions make; ferry find takes any.

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
    @Flag(help: "Include deleted documents (tombstones that kept fields; read by a scan, not an index).") var deleted = false
    @Flag(help: "Print the Mango selector the conditions make, and nothing else.") var selector = false
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

    /// `field OP value` → a Mango condition (`{"field": {"$op": value}}`), split at the
    /// first operator character; nil when there is no operator or no field.
    static func predicate(_ condition: String) -> JSONValue? {
        guard let at = condition.firstIndex(where: { "!<>=".contains($0) }) else { return nil }
        let next = condition.index(after: at)
        let two = next < condition.endIndex && condition[next] == "=" && condition[at] != "="
        let op = two ? String(condition[at...next]) : String(condition[at])
        guard op != "!" else { return nil }
        let field = condition[..<at].trimmingWhitespace()
        let text = String(condition[(two ? condition.index(after: next) : next)...]).trimmingWhitespace()
        guard !field.isEmpty else { return nil }
        let value = literal(text)
        func on(_ op: String, _ v: JSONValue) -> JSONValue { .object([field: .object([op: v])]) }
        switch (op, value) {
        case ("!=", .null): return .object(["$and": [on("$exists", true), on("$ne", .null)]])
        case ("=", _): return on("$eq", value)
        case ("!=", _): return on("$ne", value)
        case ("<", _): return on("$lt", value)
        case ("<=", _): return on("$lte", value)
        case (">", _): return on("$gt", value)
        default: return on("$gte", value)
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
        var parts: [JSONValue] = []
        if let type { parts.append(.object([db.options.typeKey: .object(["$eq": .string(type)])])) }
        parts += conditions.compactMap(Self.predicate)
        parts += exists.map { .object([$0: .object(["$exists": true])]) }
        let json: JSONValue = parts.count == 1 ? parts[0] : .object(["$and": .array(parts)])
        if selector {
            print(String(decoding: CanonicalJSON.encode(json), as: UTF8.self))
            return
        }
        do {
            let selector = try MangoSelector(json: json)
            var left = limit ?? .max
            if deleted {
                // Mango reads live documents only: tombstones are matched in a scan of every row.
                var after: String?
                while left > 0 {
                    let page = try db.allDocuments(after: after, limit: 1000, includeDeleted: true)
                    guard let last = page.last else { break }
                    for d in page where !Document.isDesignID(d.id) && selector.matches(d) && left > 0 {
                        emit(d)
                        left -= 1
                    }
                    after = last.id
                }
                return
            }
            var query = MangoQuery(selector: selector)
            while left > 0 {
                query.limit = min(left, 1000)
                let page = try db.find(query)
                page.documents.forEach(emit)
                left -= page.documents.count
                if page.documents.count < query.limit { break }
                query.bookmark = page.bookmark
            }
        } catch {
            throw CommandFailure("cannot query: \(error)")
        }
    }

    private func emit(_ d: Document) {
        if json {
            print(String(decoding: CanonicalJSON.encode(.object(d.jsonObject)), as: UTF8.self))
        } else {
            print("\(d.id)\t\(d.revisionID?.description ?? "")\(d.isDeleted ? "\tdeleted" : "")")
        }
    }
}
