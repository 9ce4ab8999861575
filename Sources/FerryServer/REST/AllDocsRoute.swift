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
        for (name, value) in r.query {
            // Keys are JSON (CouchDB: 400 `bad_request` when they are not); other parameters
            // are read as JSON where they parse (`limit=5`, `descending=true`).
            if Self.keyParameters.contains(name) {
                guard let v = try? JSONParser.parse(Array(value.utf8), sizeLimit: 1 << 20) else {
                    throw .badRequest("Invalid JSON in the \(name) parameter")
                }
                params[name] = v
            } else {
                params[name] = Self.queryJSON(value)
            }
        }
        if r.method == "POST" {
            for (k, v) in try Self.jsonObject(r) { params[k] = v }
        }
        // CouchDB's view parameter checks (couch_mrview_http): `query_parse_error`.
        func flag(_ name: String) throws(RESTError) -> Bool {
            guard let v = params[name] else { return false }
            if let b = v.boolValue { return b }
            switch v.stringValue {
            case "true"?: return true
            case "false"?: return false
            default: throw Self.queryParseError("Invalid boolean parameter: \(String(decoding: CanonicalJSON.encode(v), as: UTF8.self))")
            }
        }
        func int(_ name: String) throws(RESTError) -> Int? {
            guard let v = params[name] else { return nil }
            guard let n = v.intValue ?? v.stringValue.flatMap({ Int64($0) }), n >= 0 else {
                throw Self.queryParseError("Invalid value for positive integer: \(String(decoding: CanonicalJSON.encode(v), as: UTF8.self))")
            }
            return Int(n)
        }
        for name in ["inclusive_end", "sorted", "stable", "reduce", "att_encoding_info"] { _ = try flag(name) }
        if try flag("group") || params["group_level"] != nil { throw Self.queryParseError("Invalid use of grouping on a map view.") }
        let includeDocs = try flag("include_docs")
        let conflicts = try flag("conflicts") && includeDocs
        let attachments = try flag("attachments") && includeDocs
        let updateSeq = try flag("update_seq")
        let limit = try int("limit") ?? Int.max
        let skip = try int("skip") ?? 0
        let descending = try flag("descending")
        if let keys = params["keys"], keys.arrayValue?.isEmpty == false,
           ["startkey", "start_key", "endkey", "end_key"].contains(where: { params[$0] != nil }) {
            throw Self.queryParseError("`keys` is incompatible with `key`, `start_key` and `end_key`")
        }
        do {
            let total = designOnly ? try designDocumentCount(c.db) : try c.db.documentCount()
            var rows: [JSONValue] = []
            // CouchDB's offset is a position in the ID order, which rows chosen by `keys` have not.
            var offset: JSONValue = params["keys"] == nil ? .int(Int64(min(skip, total))) : .null
            /// One row's `doc`: the revision with `_conflicts` and inline attachments if asked.
            func docJSON(_ d: Document) throws -> JSONValue {
                let tree = conflicts ? try c.db.revisionTree(of: d.id) : nil
                return .object(Self.documentObject(c.db, d, tree: tree, extras: DocumentJSON.Extras(conflicts: conflicts),
                                                   mode: attachments ? .inline : .stubs).json)
            }
            if let keys = params["keys"] {
                guard var list = keys.arrayValue else { throw RESTError.badRequest("`keys` must be an array of strings") }
                if designOnly { list.removeAll { $0.stringValue.map { !$0.hasPrefix(Document.designPrefix) } ?? false } }
                // CouchDB walks the keys backwards for `descending`.
                if descending { list.reverse() }
                for key in list.dropFirst(skip).prefix(limit) {
                    guard let id = key.stringValue else { rows.append(.object(["key": key, "error": "not_found"])); continue }
                    rows.append(try row(c.db, id: id, doc: includeDocs ? docJSON : nil))
                }
            } else {
                // `key` is a range of one (a missing key is no row, not an error row). In
                // `_all_docs` the document ID is the key, so `startkey_docid`/`endkey_docid`
                // bound the range when no key does.
                let start = (params["key"] ?? params["startkey"] ?? params["start_key"] ?? params["startkey_docid"]
                             ?? params["start_key_doc_id"])?.stringValue
                let end = (params["key"] ?? params["endkey"] ?? params["end_key"] ?? params["endkey_docid"]
                           ?? params["end_key_doc_id"])?.stringValue
                let inclusiveEnd = try params["inclusive_end"] == nil || flag("inclusive_end")
                var (low, high) = descending ? (end, start) : (start, end)
                if designOnly {
                    low = max(low ?? Self.designRange.low, Self.designRange.low)
                    high = min(high ?? Self.designRange.high, Self.designRange.high)
                }
                var docs: [Document] = []
                var after: String?
                let wanted = descending || limit == Int.max ? Int.max : skip + limit
                // Where the range starts in the whole ID order, plus what was skipped (CouchDB
                // reports at most `total_rows`).
                if let first = descending ? high : low {
                    offset = .int(Int64(min(try c.db.documentCount(outside: first, after: descending) + skip, total)))
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
                    if includeDocs { o["doc"] = try docJSON(d) }
                    rows.append(.object(o))
                }
            }
            var answer: [String: JSONValue] = ["total_rows": .int(Int64(total)), "offset": offset, "rows": .array(rows)]
            if updateSeq { answer["update_seq"] = .string(String(c.db.lastSequence)) }
            return .json(200, .object(answer))
        } catch {
            throw RESTError.from(error)
        }
    }

    /// The `_all_docs` parameters whose values are JSON keys.
    static let keyParameters: Set<String> = ["key", "keys", "startkey", "start_key", "endkey", "end_key"]

    /// CouchDB's 400 for a view parameter it cannot use.
    static func queryParseError(_ reason: String) -> RESTError { RESTError(400, "query_parse_error", reason) }

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

    /// One `keys` row: the current revision, a deleted one's tombstone, or `not_found`; with
    /// `doc`, the document as that renders it.
    private func row(_ db: Database, id: String, doc: ((Document) throws -> JSONValue)?) throws -> JSONValue {
        guard let d = try db.document(id, includeDeleted: true) else {
            return .object(["key": .string(id), "error": "not_found"])
        }
        var value: [String: JSONValue] = ["rev": .string(d.revisionID?.description ?? "")]
        if d.isDeleted { value["deleted"] = true }
        var o: [String: JSONValue] = ["id": .string(id), "key": .string(id), "value": .object(value)]
        if let doc { o["doc"] = d.isDeleted ? .null : try doc(d) }
        return .object(o)
    }

    /// A query parameter as JSON (CouchDB sends `startkey="a"`, `keys=["a"]`, `limit=5`);
    /// text that is not JSON stays a string.
    static func queryJSON(_ value: String) -> JSONValue {
        (try? JSONParser.parse(Array(value.utf8), sizeLimit: 1 << 20)) ?? .string(value)
    }
}
