import FerryStore

/// `GET|POST /{db}/_all_docs` (Protocol/rest.md, "All documents"): documents by ID with
/// `keys`, `key`, `startkey`/`endkey` (and CouchDB's `start_key`/`end_key`), `inclusive_end`,
/// `limit`, `skip`, `descending` and `include_docs`. `GET|POST /{db}/_design_docs` is the same
/// over design documents only (CouchDB's: other keys are dropped, the range is clamped to
/// `_design/`…, `total_rows` counts design documents).
extension RESTRouter {
    /// The range of IDs design documents take: `_design/` and a name. No document can be
    /// `_design0` (a reserved ID), so an inclusive upper bound there is exact.
    static let designRange = (low: Document.designPrefix, high: "_design0")

    func allDocs(_ c: Context, designOnly: Bool = false) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "POST"])
        let r = c.request
        var params: [String: JSONValue] = [:]
        for (name, value) in r.query { params[name] = Self.queryJSON(value) }
        if r.method == "POST" {
            for (k, v) in try Self.jsonObject(r) { params[k] = v }
        }
        func flag(_ name: String) -> Bool { params[name]?.boolValue ?? (params[name]?.stringValue == "true") }
        func int(_ name: String) throws(RESTError) -> Int? {
            guard let v = params[name] else { return nil }
            guard let n = v.intValue ?? v.stringValue.flatMap({ Int64($0) }), n >= 0 else {
                throw .badRequest("Invalid value for \(name): it must be a non-negative integer")
            }
            return Int(n)
        }
        let includeDocs = flag("include_docs")
        let limit = try int("limit") ?? Int.max
        let skip = try int("skip") ?? 0
        let descending = flag("descending")
        do {
            let total = designOnly ? try designDocumentCount(c.db) : try c.db.documentCount()
            var rows: [JSONValue] = []
            // CouchDB's offset is a position in the ID order, which rows chosen by `keys` have not.
            var offset: JSONValue = params["keys"] == nil ? .int(Int64(skip)) : .null
            if let keys = params["keys"] {
                guard var list = keys.arrayValue else { throw RESTError.badRequest("`keys` must be an array of strings") }
                if designOnly { list.removeAll { $0.stringValue.map { !$0.hasPrefix(Document.designPrefix) } ?? false } }
                for key in list.dropFirst(skip).prefix(limit) {
                    guard let id = key.stringValue else { rows.append(.object(["key": key, "error": "not_found"])); continue }
                    rows.append(try row(c.db, id: id, includeDocs: includeDocs, fromKeys: true))
                }
            } else {
                // `key` is a range of one (a missing key is no row, not an error row).
                let start = (params["key"] ?? params["startkey"] ?? params["start_key"])?.stringValue
                let end = (params["key"] ?? params["endkey"] ?? params["end_key"])?.stringValue
                let inclusiveEnd = params["inclusive_end"].map { $0.boolValue ?? ($0.stringValue != "false") } ?? true
                var (low, high) = descending ? (end, start) : (start, end)
                if designOnly {
                    low = max(low ?? Self.designRange.low, Self.designRange.low)
                    high = min(high ?? Self.designRange.high, Self.designRange.high)
                }
                var docs: [Document] = []
                var after: String?
                let wanted = descending || limit == Int.max ? Int.max : skip + limit
                // Where the range starts in the whole ID order, plus what was skipped.
                if let first = descending ? high : low {
                    offset = .int(Int64(try c.db.documentCount(outside: first, after: descending) + skip))
                }
                while docs.count < wanted {
                    let page = try c.db.allDocuments(from: low, to: high, after: after, limit: 1000)
                    docs += page
                    guard page.count == 1000, let last = page.last else { break }
                    after = last.id
                }
                if !inclusiveEnd, let end { docs.removeAll { $0.id == end } }
                if descending { docs.reverse() }
                for d in docs.dropFirst(skip).prefix(limit) {
                    var o: [String: JSONValue] = ["id": .string(d.id), "key": .string(d.id),
                                                  "value": .object(["rev": .string(d.revisionID?.description ?? "")])]
                    if includeDocs { o["doc"] = DocumentJSON.object(d, tree: nil, revs: false, revsInfo: false, conflicts: false) }
                    rows.append(.object(o))
                }
            }
            return .json(200, .object(["total_rows": .int(Int64(total)), "offset": offset, "rows": .array(rows)]))
        } catch {
            throw RESTError.from(error)
        }
    }

    /// How many live design documents the database holds (few: they are read page by page).
    private func designDocumentCount(_ db: Database) throws(StoreError) -> Int {
        var count = 0
        var after: String?
        while true {
            let page = try db.allDocuments(from: Self.designRange.low, to: Self.designRange.high, after: after, limit: 1000)
            count += page.count
            guard page.count == 1000, let last = page.last else { return count }
            after = last.id
        }
    }

    /// One `keys` row: the current revision, a deleted one's tombstone, or `not_found`.
    private func row(_ db: Database, id: String, includeDocs: Bool, fromKeys: Bool) throws(StoreError) -> JSONValue {
        guard let d = try db.document(id, includeDeleted: true) else {
            return .object(["key": .string(id), "error": "not_found"])
        }
        var value: [String: JSONValue] = ["rev": .string(d.revisionID?.description ?? "")]
        if d.isDeleted { value["deleted"] = true }
        var o: [String: JSONValue] = ["id": .string(id), "key": .string(id), "value": .object(value)]
        if includeDocs { o["doc"] = d.isDeleted ? .null : DocumentJSON.object(d, tree: nil, revs: false, revsInfo: false, conflicts: false) }
        return .object(o)
    }

    /// A query parameter as JSON (CouchDB sends `startkey="a"`, `keys=["a"]`, `limit=5`);
    /// text that is not JSON stays a string.
    static func queryJSON(_ value: String) -> JSONValue {
        (try? JSONParser.parse(Array(value.utf8), sizeLimit: 1 << 20)) ?? .string(value)
    }
}
