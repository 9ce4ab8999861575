import FerryStore
import FoundationEssentials

/// Mango queries (Protocol/rest.md, "Queries"): `POST /{db}/_find` and `_explain` on the
/// store's Mango engine (`Database.find`, CouchDB 3.5's semantics), and the indexes —
/// `GET/POST /{db}/_index`, `DELETE /{db}/_index/{ddoc}/json/{name}` — kept as CouchDB keeps
/// them, in design documents whose `language` is `"query"`.
extension RESTRouter {
    func find(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        let query = try Self.mangoQuery(c)
        guard query.partition.isEmpty else {
            throw RESTError(400, "query_parse_error", "`partition` parameter is not supported in this db.")
        }
        let started = ContinuousClock.now
        let result: MangoResult
        do { result = try c.db.find(query) } catch { throw Self.mangoFailure(error) }
        var rows: [JSONValue] = []
        rows.reserveCapacity(result.documents.count)
        for doc in result.documents {
            let tree = query.conflicts ? try? c.db.revisionTree(of: doc.id) : nil
            let json = DocumentJSON.object(doc, tree: tree, DocumentJSON.Extras(conflicts: query.conflicts))
            guard let fields = query.fields, case .object(let o) = json else { rows.append(json); continue }
            rows.append(.object(MangoFieldPath.project(o, fields)))
        }
        var out: [String: JSONValue] = ["docs": .array(rows), "bookmark": .string(result.bookmark)]
        if !result.warnings.isEmpty { out["warning"] = .string(result.warnings.joined(separator: "\n")) }
        if query.executionStats {
            let elapsed = ContinuousClock.now - started
            let ms = elapsed.seconds * 1000
            out["execution_stats"] = .object([
                "total_keys_examined": .int(Int64(result.keysExamined)),
                "total_docs_examined": .int(Int64(result.documentsExamined)),
                "total_quorum_docs_examined": 0,
                "results_returned": .int(Int64(rows.count)),
                "execution_time_ms": .double(ms),
            ])
        }
        return .json(200, .object(out))
    }

    /// `POST /{db}/_explain`: the index a `_find` would use, and the query as it would run.
    func explain(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        let query = try Self.mangoQuery(c)
        // CouchDB's `_explain` answers a query no index serves with `"index": null` (its
        // `_find` refuses it), but refuses a `use_index` it may not fall back from.
        let plan: (index: MangoIndex, warnings: [String])?
        do { plan = try c.db.plan(query) } catch let e as MangoError where e.error == "no_usable_index" {
            if !query.useIndex.isEmpty, !query.allowFallback { throw Self.mangoFailure(MangoError.invalidIndex(query.useIndex)) }
            plan = nil
        } catch { throw Self.mangoFailure(error) }
        let fields: JSONValue = .array((query.fields ?? []).map { .string($0.text) })
        let opts: [String: JSONValue] = [
            "use_index": .array(query.useIndex.map { .string($0) }), "bookmark": .string(query.bookmark ?? "nil"),
            "limit": .int(Int64(query.limit)), "skip": .int(Int64(query.skip)),
            "sort": .object(Dictionary(query.sort.fields.map { ($0.path.text, JSONValue.string($0.direction)) }, uniquingKeysWith: { a, _ in a })),
            "fields": fields, "partition": "", "r": 1, "conflicts": .bool(query.conflicts), "stale": false, "update": true,
            "stable": false, "execution_stats": .bool(query.executionStats), "allow_fallback": .bool(query.allowFallback),
        ]
        // Whether the index alone could answer (its columns and `_id` hold every field asked).
        let covering = plan.map { p in
            p.index.designDocument != nil && query.fields.map { f in Set(f.map(\.text)).isSubset(of: Set(p.index.columns + ["_id"])) } == true
        } ?? false
        let indexable = query.selector.fieldHints
        return .json(200, .object([
            "dbname": .string(c.name), "index": plan.map { $0.index.json } ?? .null, "partitioned": false,
            "selector": query.selector.json, "opts": .object(opts), "limit": .int(Int64(query.limit)),
            "skip": .int(Int64(query.skip)), "fields": fields, "covering": .bool(covering), "index_candidates": [],
            "selector_hints": [.object(["type": "json", "indexable_fields": .array(indexable.indexable.map { .string($0) }),
                                        "unindexable_fields": .array(indexable.unindexable.map { .string($0) })])],
        ]))
    }

    /// `/{db}/_index…`: list (`GET`), create (`POST`), delete (`DELETE …/{ddoc}/json/{name}`).
    func findIndex(_ c: Context) throws(RESTError) -> RESTResponse {
        let rest = Array(c.request.segments.dropFirst(2))
        if rest.isEmpty {
            switch c.request.method {
            case "GET", "HEAD": return try listFindIndexes(c)
            case "POST": return try createFindIndex(c)
            default: throw .methodNotAllowed("GET,HEAD,POST")
            }
        }
        guard c.request.method == "DELETE" else { throw .methodNotAllowed("DELETE") }
        // `{ddoc}/json/{name}`, the design document named with or without `_design/`.
        var parts = rest[...]
        if parts.first == "_design" { parts = parts.dropFirst() }
        guard parts.count == 3, let ddocName = parts.first, parts[parts.startIndex + 1] == "json", let name = parts.last else {
            throw .notFound("missing")
        }
        return try deleteFindIndex(c, ddoc: ddocName.hasPrefix("_design/") ? ddocName : "_design/" + ddocName, name: name)
    }

    private func listFindIndexes(_ c: Context) throws(RESTError) -> RESTResponse {
        let indexes: [MangoIndex]
        do { indexes = try c.db.mangoIndexes() } catch { throw RESTError(error) }
        return .json(200, .object(["total_rows": .int(Int64(indexes.count)), "indexes": .array(indexes.map(\.json))]))
    }

    /// `POST /{db}/_index`: a `json` index saved in its design document (admin, as writing
    /// a design document is); `exists` when the same index is there already.
    func createFindIndex(_ c: Context) throws(RESTError) -> RESTResponse {
        try require(.admin, c)
        let body = try Self.jsonObject(c.request)
        func fail(_ e: MangoError) -> RESTError { RESTError(e.status, e.error, e.reason) }
        guard let def = body["index"] else { throw fail(MangoError("missing_required_key", "Missing required key: index")) }
        guard case .object(let d) = def else {
            throw fail(MangoError("invalid_index", "JSON indexes must be an object, not: \(MangoSort.show(def))"))
        }
        let type = body["type"] ?? "json"
        guard case .string(let typeName) = type else { throw fail(MangoError("invalid_string", "Invalid string: \(MangoSort.show(type))")) }
        guard typeName == "json" else { throw fail(MangoError("invalid_index", "Invalid type for index: \(typeName)")) }
        for key in ["name", "ddoc"] {
            guard let v = body[key] else { continue }
            guard case .string(let t) = v else { throw fail(MangoError("invalid_string", "Invalid string: \(MangoSort.show(v))")) }
            if t.isEmpty { throw fail(MangoError("invalid_empty_string", "Index name or ddoc cannot be empty string")) }
        }
        if let bad = body.keys.sorted().first(where: { !["index", "type", "name", "ddoc", "w", "partitioned"].contains($0) }) {
            throw fail(MangoError("invalid_key", "Invalid key \(bad) for this request."))
        }
        guard let fieldsJSON = d["fields"] else { throw fail(MangoError("missing_required_key", "Missing required key: fields")) }
        let sort: MangoSort
        do { sort = try MangoSort(json: fieldsJSON) } catch { throw fail(error) }
        var partial: JSONValue?
        if let p = d["partial_filter_selector"] {
            // Kept normalized, as CouchDB keeps (and lists) it.
            do { partial = try MangoSelector(json: p).json } catch { throw fail(error) }
            if partial == .object([:]) { partial = Optional.none }
        }
        if let bad = d.keys.sorted().first(where: { !["fields", "partial_filter_selector"].contains($0) }) {
            throw fail(MangoError("invalid_key", "Invalid key \(bad) for this request."))
        }
        let index = MangoIndex(fields: sort.fields, partialFilter: partial, name: body["name"]?.stringValue,
                               designDocument: body["ddoc"]?.stringValue)
        let ddocID = index.designDocument ?? "", name = index.name
        do {
            if try !c.db.createMangoIndex(index) {
                return .json(200, .object(["result": "exists", "id": .string(ddocID), "name": .string(name)]))
            }
        } catch {
            throw Self.mangoFailure(error)
        }
        return .json(200, .object(["result": "created", "id": .string(ddocID), "name": .string(name)]))
    }

    private func deleteFindIndex(_ c: Context, ddoc: String, name: String) throws(RESTError) -> RESTResponse {
        try require(.admin, c)
        let removed: Bool
        do { removed = try c.db.deleteMangoIndex(designDocument: ddoc, name: name) } catch { throw RESTError.from(error) }
        guard removed else { throw RESTError(404, "not_found", "Index not found") }
        return .ok()
    }

    /// The `_find`/`_explain` body read as a Mango query.
    static func mangoQuery(_ c: Context) throws(RESTError) -> MangoQuery {
        let body = try jsonObject(c.request)
        do { return try MangoQuery(json: body) } catch { throw RESTError(error.status, error.error, error.reason) }
    }

    /// A Mango refusal or a store fault as the answer says it.
    static func mangoFailure(_ error: any Error) -> RESTError {
        if let m = error as? MangoError { return RESTError(m.status, m.error, m.reason) }
        return RESTError.from(error)
    }
}
