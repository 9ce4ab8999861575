import FerryStore
import Foundation

/// `POST /{db}/_find` and `POST /{db}/_index` (Protocol/rest.md, "Maintenance and queries"):
/// Mango selectors as far as the store's `Predicate` can run them — `$eq $ne $gt $gte $lt
/// $lte $exists $in $and $or`, implicit equality, dotted paths and nested objects — with
/// `limit`, `skip`, `fields` and `bookmark`. Anything else is 400 naming what is unsupported,
/// never a silently different answer. Results come in document-ID order (the only sort).
extension RESTRouter {
    /// CouchDB's default page.
    static let findDefaultLimit = 25
    /// Documents read from the store per query while skipping and filtering.
    static let findPageSize = 500

    func find(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        let body = try Self.jsonObject(c.request)
        // CouchDB's error names (mango_error): no selector, one that is not an object.
        guard let given = body["selector"] else { throw RESTError(400, "missing_required_key", "Missing required key: selector") }
        guard let selector = given.objectValue else { throw RESTError(400, "invalid_selector_json", "Selector must be a JSON object") }
        let limit = try Self.count(body["limit"], "limit") ?? Self.findDefaultLimit
        let skip = try Self.count(body["skip"], "skip") ?? 0
        let fields = try Self.fieldList(body["fields"])
        try Self.checkSort(body["sort"])
        var after: String?
        if let b = body["bookmark"] {
            guard let text = b.stringValue else { throw .badRequest("bookmark must be a string") }
            if !text.isEmpty, text != "nil" {
                guard let id = Self.decodeBookmark(text) else { throw .badRequest("bookmark is not one this server gave") }
                after = id
            }
        }
        var translator = SelectorTranslator()
        let predicate = try translator.predicate(selector)
        let idConditions = translator.idConditions

        var docs: [Document] = []
        var toSkip = skip
        var warning: String?
        do {
            if limit > 0 {
                let typeKey = c.db.options.typeKey
                scan: while true {
                    let page: [Document]
                    if case .equal(typeKey, .string(let type)) = predicate {
                        page = try c.db.documents(ofType: type, after: after, limit: Self.findPageSize)
                    } else {
                        page = try c.db.documents(matching: predicate, after: after, limit: Self.findPageSize)
                    }
                    for doc in page {
                        after = doc.id
                        // CouchDB's _find never answers design documents.
                        guard !Document.isDesignID(doc.id), SelectorTranslator.idMatches(doc.id, idConditions) else { continue }
                        if toSkip > 0 { toSkip -= 1; continue }
                        docs.append(doc)
                        if docs.count == limit { break scan }
                    }
                    if page.count < Self.findPageSize { break }
                }
            }
            // CouchDB's hint when the query had to read every document.
            if !(try c.db.explain(predicate)).contains(where: { $0.contains("SEARCH") }) {
                warning = "No matching index found, create an index to optimize query time."
            }
        } catch { throw RESTError(error) }

        let rows: [JSONValue] = docs.map { doc in
            let json = DocumentJSON.object(doc, tree: nil, revs: false, revsInfo: false, conflicts: false)
            guard let fields, let o = json.objectValue else { return json }
            return .object(Self.project(o, fields))
        }
        var out: [String: JSONValue] = ["docs": .array(rows), "bookmark": .string(docs.last.map { Self.encodeBookmark($0.id) } ?? "nil")]
        if let warning { out["warning"] = .string(warning) }
        return .json(200, .object(out))
    }

    /// `POST /{db}/_index` `{"index":{"fields":[…]}}`: a store index on each field (writer).
    /// The store keeps no list of them, so there is no `GET`.
    func createFindIndex(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        if let type = body["type"], type.stringValue != "json" { throw .badRequest("only `json` indexes are supported") }
        guard let list = body["index"]?.objectValue?["fields"]?.arrayValue, !list.isEmpty else {
            throw .badRequest("_index needs `index.fields`, a non-empty array")
        }
        var fields: [String] = []
        for f in list {
            if let name = f.stringValue {
                fields.append(name)
            } else if let o = f.objectValue, o.count == 1, let (name, dir) = o.first, dir.stringValue == "asc" || dir.stringValue == "desc" {
                fields.append(name)
            } else {
                throw .badRequest("index fields are names or {\"name\":\"asc\"}")
            }
        }
        do {
            for f in fields where f != "_id" { try c.db.createIndex(on: f) }
        } catch { throw RESTError(error) }
        let name = body["name"]?.stringValue ?? "ferry-" + fields.joined(separator: "-")
        return .json(200, .object(["result": "created", "id": .string("_design/" + name), "name": .string(name)]))
    }

    private static func count(_ v: JSONValue?, _ name: String) throws(RESTError) -> Int? {
        guard let v else { return nil }
        guard let n = v.intValue, n >= 0, n <= Int64(Int32.max) else {
            throw RESTError(400, "invalid_non_neg_integer", "Invalid value for \(name): it must be a non-negative integer")
        }
        return Int(n)
    }

    private static func fieldList(_ v: JSONValue?) throws(RESTError) -> [String]? {
        guard let v else { return nil }
        guard let a = v.arrayValue else { throw .badRequest("fields must be an array of field names") }
        var out: [String] = []
        for f in a {
            guard let s = f.stringValue, !s.isEmpty else { throw .badRequest("fields must be an array of field names") }
            out.append(s)
        }
        return out
    }

    /// Results are in ID order: a sort that asks for exactly that is fine, any other is 400.
    private static func checkSort(_ v: JSONValue?) throws(RESTError) {
        guard let v else { return }
        guard let a = v.arrayValue else { throw .badRequest("sort must be an array") }
        for s in a {
            if s.stringValue == "_id" { continue }
            if let o = s.objectValue, o.count == 1, o["_id"]?.stringValue == "asc" { continue }
            throw .badRequest("unsupported sort: Ferry's _find returns documents in _id order only")
        }
    }

    /// `doc` reduced to the named (dotted) fields that it has.
    static func project(_ doc: [String: JSONValue], _ fields: [String]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for field in fields {
            let path = field.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            var value: JSONValue? = .object(doc)
            for p in path { value = value?.objectValue?[p] }
            if let value { set(&out, path[...], value) }
        }
        return out
    }

    private static func set(_ o: inout [String: JSONValue], _ path: ArraySlice<String>, _ value: JSONValue) {
        guard let head = path.first else { return }
        if path.count == 1 { o[head] = value; return }
        var inner = o[head]?.objectValue ?? [:]
        set(&inner, path.dropFirst(), value)
        o[head] = .object(inner)
    }

    /// A bookmark is the last ID returned, base64url so it is opaque and safe in a URL.
    static func encodeBookmark(_ id: String) -> String {
        Data(id.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    static func decodeBookmark(_ text: String) -> String? {
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return Data(base64Encoded: standard).flatMap { String(data: $0, encoding: .utf8) }
    }
}

/// Turns a Mango selector into a store `Predicate`, plus conditions on `_id` (which is not in
/// the body the predicate reads) that are checked on each result. `_id` conditions are only
/// allowed where every result must meet them (top level and `$and`), so checking them after
/// the query is exact.
struct SelectorTranslator {
    /// One condition on the document ID.
    enum IDCondition: Equatable {
        case equal(String), notEqual(String), greater(String), greaterOrEqual(String), less(String), lessOrEqual(String)
        case `in`([String])
        case never
    }

    private(set) var idConditions: [IDCondition] = []

    /// The predicate for a whole selector (an implicit `$and` of its members).
    mutating func predicate(_ selector: [String: JSONValue]) throws(RESTError) -> FerryStore.Predicate {
        let parts = try members(selector, prefix: nil, conjunctive: true)
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    private mutating func members(_ o: [String: JSONValue], prefix: String?, conjunctive: Bool) throws(RESTError) -> [FerryStore.Predicate] {
        var out: [FerryStore.Predicate] = []
        // Sorted, so the same selector always compiles to the same SQL.
        for (key, value) in o.sorted(by: { $0.key < $1.key }) {
            if key.hasPrefix("$") {
                guard prefix == nil else { throw .badRequest("operator \(key) must be inside a field's condition object") }
                switch key {
                case "$and", "$or":
                    guard let list = value.arrayValue, !list.isEmpty else { throw .badRequest("\(key) needs a non-empty array of selectors") }
                    var subs: [FerryStore.Predicate] = []
                    for item in list {
                        guard let s = item.objectValue else { throw .badRequest("\(key) needs an array of selector objects") }
                        let parts = try members(s, prefix: nil, conjunctive: conjunctive && key == "$and")
                        subs.append(parts.count == 1 ? parts[0] : .and(parts))
                    }
                    out.append(key == "$and" ? .and(subs) : .or(subs))
                default:
                    throw Self.unsupported(key)
                }
                continue
            }
            let path = prefix.map { "\($0).\(key)" } ?? key
            if path == "_id" {
                guard conjunctive else { throw .badRequest("conditions on _id are supported only at the top level or in $and") }
                try idConditions.append(contentsOf: Self.idConditions(value))
                continue
            }
            if path.hasPrefix("_") && path != "_attachments" && !path.hasPrefix("_attachments.") {
                throw .badRequest("_find cannot select on \(path): Ferry keeps it outside the document body")
            }
            if case .object(let inner) = value, !inner.isEmpty {
                let ops = inner.keys.filter { $0.hasPrefix("$") }
                if ops.count == inner.count {
                    for (op, operand) in inner.sorted(by: { $0.key < $1.key }) { out.append(try Self.condition(path, op, operand)) }
                } else if ops.isEmpty {
                    out += try members(inner, prefix: path, conjunctive: conjunctive)
                } else {
                    throw .badRequest("the condition on \(path) mixes operators and fields")
                }
            } else {
                out.append(try Self.condition(path, "$eq", value))
            }
        }
        return out
    }

    /// The operators CouchDB's Mango knows; any other is its `invalid_operator`.
    static let mangoOperators: Set<String> = [
        "$and", "$or", "$not", "$nor", "$all", "$elemMatch", "$allMatch", "$keyMapMatch", "$lt", "$lte", "$eq", "$ne",
        "$gte", "$gt", "$exists", "$type", "$in", "$nin", "$size", "$mod", "$regex", "$beginsWith", "$text", "$default",
    ]

    private static func unsupported(_ op: String) -> RESTError {
        guard mangoOperators.contains(op) else { return RESTError(400, "invalid_operator", "Invalid operator: \(op)") }
        return .badRequest("unsupported operator \(op): Ferry's _find supports $eq $ne $gt $gte $lt $lte $exists $in $and $or")
    }

    /// One operator on a field. Null follows CouchDB's collation (null sorts first), arrays and
    /// objects cannot be compared by the store.
    private static func condition(_ f: String, _ op: String, _ v: JSONValue) throws(RESTError) -> FerryStore.Predicate {
        let present: FerryStore.Predicate = .and([.exists(f), .not(.isNull(f))])
        func scalar() throws(RESTError) -> JSONValue {
            switch v {
            case .array, .object: throw .badRequest("\(op) on \(f): arrays and objects cannot be compared")
            default: return v
            }
        }
        switch op {
        case "$eq": return v == .null ? .isNull(f) : .equal(f, try scalar())
        case "$ne": return v == .null ? present : .notEqual(f, try scalar())
        case "$gt": return v == .null ? present : .greater(f, try scalar())
        case "$gte": return v == .null ? .exists(f) : .greaterOrEqual(f, try scalar())
        case "$lt": return v == .null ? .or([]) : .less(f, try scalar())
        case "$lte": return v == .null ? .isNull(f) : .lessOrEqual(f, try scalar())
        case "$exists":
            guard let b = v.boolValue else { throw .badRequest("$exists on \(f) needs true or false") }
            return b ? .exists(f) : .not(.exists(f))
        case "$in":
            guard let list = v.arrayValue else { throw .badRequest("$in on \(f) needs an array") }
            var values: [JSONValue] = []
            var null = false
            for item in list {
                switch item {
                case .null: null = true
                case .array, .object: throw .badRequest("$in on \(f): arrays and objects cannot be compared")
                default: values.append(item)
                }
            }
            return null ? .or([.in(f, values), .isNull(f)]) : .in(f, values)
        default:
            throw unsupported(op)
        }
    }

    private static func idConditions(_ value: JSONValue) throws(RESTError) -> [IDCondition] {
        guard case .object(let ops) = value else {
            guard let s = value.stringValue else { return [.never] }  // an ID is always a string
            return [.equal(s)]
        }
        var out: [IDCondition] = []
        for (op, v) in ops.sorted(by: { $0.key < $1.key }) {
            switch (op, v) {
            case ("$gt", .null), ("$gte", .null), ("$ne", .null): continue  // every ID sorts after null
            case ("$lt", .null), ("$lte", .null), ("$eq", .null): out.append(.never)
            case ("$exists", .bool(let b)): if !b { out.append(.never) }
            case ("$eq", .string(let s)): out.append(.equal(s))
            case ("$ne", .string(let s)): out.append(.notEqual(s))
            case ("$gt", .string(let s)): out.append(.greater(s))
            case ("$gte", .string(let s)): out.append(.greaterOrEqual(s))
            case ("$lt", .string(let s)): out.append(.less(s))
            case ("$lte", .string(let s)): out.append(.lessOrEqual(s))
            case ("$in", .array(let a)): out.append(.in(a.compactMap(\.stringValue)))
            case ("$eq", _), ("$ne", _), ("$gt", _), ("$gte", _), ("$lt", _), ("$lte", _), ("$exists", _), ("$in", _):
                throw .badRequest("\(op) on _id needs a string (or null)")
            default: throw unsupported(op)
            }
        }
        return out
    }

    /// Whether `id` meets every condition; IDs compare as UTF-8 bytes, the store's ID order.
    static func idMatches(_ id: String, _ conditions: [IDCondition]) -> Bool {
        func less(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        return conditions.allSatisfy { c in
            switch c {
            case .equal(let s): id == s
            case .notEqual(let s): id != s
            case .greater(let s): less(s, id)
            case .greaterOrEqual(let s): !less(id, s)
            case .less(let s): less(id, s)
            case .lessOrEqual(let s): !less(s, id)
            case .in(let list): list.contains(id)
            case .never: false
            }
        }
    }
}
