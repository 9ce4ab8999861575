import ArgumentParser
import FerryStore
import FoundationEssentials

/// `ferry find`: a Mango query (`_find`'s body, or just a selector) on a database file, by
/// the engine `_find` uses (`Database.find`).
struct FindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Run a Mango query (CouchDB's _find) on a database.",
        discussion: """
        QUERY is a _find body — {"selector": …, "sort": …, "limit": …, "skip": …, "fields": …, \\
        "bookmark": …, "use_index": …} — or a bare selector (then limit 25, as CouchDB). It is \\
        answered as CouchDB 3.5 answers it (Protocol/rest.md, "Queries"): sorts need an index \\
        (ferry index add), comparisons use CouchDB's collation.

        Prints each document as JSON, one a line; the page's bookmark and any warning go to \\
        standard error. --all follows the bookmarks until every match is printed. --explain \\
        prints the index that would serve the query instead.

        Example:
          ferry find --db tasks.db '{"type":"task","prio":{"$gte":2}}'
          ferry find --db tasks.db '{"selector":{"prio":{"$gt":0}},"sort":["prio"],"limit":10}'
          ferry find --db tasks.db --all '{"done":false}' | jq -r ._id
        """)
    @OptionGroup var database: DatabaseOption
    @Argument(help: ArgumentHelp("The query: a _find body, or a selector.", valueName: "query")) var query: String
    @Flag(help: "Follow the bookmarks until every matching document is printed.") var all = false
    @Flag(help: "Print the index that would serve the query, and nothing else.") var explain = false

    func run() async throws {
        let parsed: MangoQuery
        do {
            guard case .object(let o) = try JSONParser.parse(Array(query.utf8), sizeLimit: 1 << 20) else {
                throw MangoError("bad_request", "the query must be a JSON object")
            }
            parsed = try MangoQuery(json: o["selector"] == nil ? ["selector": .object(o)] : o)
        } catch {
            throw ValidationError("not a query: \(error)")
        }
        let db = try database.openExisting()
        defer { db.close() }
        do {
            if explain {
                let plan = try db.plan(parsed)
                print(String(decoding: CanonicalJSON.encode(.object(["index": plan.index.json,
                                                                    "warnings": .array(plan.warnings.map { .string($0) })])),
                             as: UTF8.self))
                return
            }
            var q = parsed
            while true {
                let page = try db.find(q)
                for doc in page.documents {
                    var props = doc.jsonObject
                    if let fields = q.fields { props = MangoFieldPath.project(props, fields) }
                    print(String(decoding: CanonicalJSON.encode(.object(props)), as: UTF8.self))
                }
                for w in page.warnings { warn("warning: \(w)") }
                guard all, page.documents.count == q.limit, q.limit > 0 else {
                    warn("bookmark: \(page.bookmark)")
                    break
                }
                q.bookmark = page.bookmark
                q.skip = 0
            }
        } catch {
            throw CommandFailure("cannot find: \(error)")
        }
    }
}
