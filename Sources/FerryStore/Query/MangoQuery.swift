/// A `_find` request as CouchDB 3.5 reads it (`mango_opts:validate_find`): the selector and
/// the options, each checked, with CouchDB's error names for what it refuses.
public struct MangoQuery: Sendable {
    /// The documents wanted.
    public var selector: MangoSelector
    /// The members each answer keeps (nil: all).
    public var fields: [MangoFieldPath]?
    /// The order (empty: the chosen index's).
    public var sort: MangoSort
    /// At most this many documents (CouchDB's default is 25).
    public var limit: Int = 25
    /// Matching documents passed over first.
    public var skip: Int = 0
    /// Where the previous page ended (`bookmark` of its answer).
    public var bookmark: String?
    /// The index asked for: `[ddoc]` or `[ddoc, name]` (empty: none).
    public var useIndex: [String] = []
    /// Whether another index may serve when the one asked for cannot (CouchDB's default: yes).
    public var allowFallback = true
    /// Whether each answer lists its conflicting revisions (`_conflicts`).
    public var conflicts = false
    /// Whether the answer carries `execution_stats`.
    public var executionStats = false
    /// The `partition` asked for (empty: none). Ferry's databases are not partitioned:
    /// `_find` refuses one as CouchDB does for such a database; `_explain` ignores it.
    public var partition = ""

    /// A query for `selector` with the defaults.
    public init(selector: MangoSelector) {
        self.selector = selector
        sort = MangoSort.none
    }

    /// A query from a `_find` body.
    public init(json body: [String: JSONValue]) throws(MangoError) {
        let known: Set<String> = ["selector", "use_index", "bookmark", "limit", "skip", "sort", "fields", "partition", "r",
                                  "conflicts", "stale", "update", "stable", "execution_stats", "allow_fallback"]
        guard let selector = body["selector"] else {
            throw MangoError("missing_required_key", "Missing required key: selector")
        }
        self.selector = try MangoSelector(json: selector)
        sort = MangoSort.none
        if let v = body["use_index"] { useIndex = try Self.useIndex(v) }
        if let v = body["bookmark"] {
            switch v {
            case .null: bookmark = nil
            case .string(let s): bookmark = s.isEmpty ? nil : s
            default: throw MangoError("invalid_bookmark", "Invalid bookmark value: \(MangoSort.show(v))")
            }
        }
        if let v = body["limit"] { limit = try Self.nonNegative(v) }
        if let v = body["skip"] { skip = try Self.nonNegative(v) }
        if let v = body["sort"] { sort = try MangoSort(json: v) }
        if let v = body["fields"] {
            guard case .array(let list) = v else {
                throw MangoError("invalid_fields", "Fields must be an array of strings, not: \(MangoSort.show(v))")
            }
            var paths: [MangoFieldPath] = []
            for f in list {
                guard case .string(let name) = f else { throw MangoError("invalid_field", "Invalid JSON for field spec: \(MangoSort.show(f))") }
                paths.append(try MangoFieldPath(name))
            }
            fields = paths.isEmpty ? nil : paths
        }
        if let v = body["partition"] {
            guard case .string(let p) = v else { throw MangoError("invalid_partition", "Partition must be a string.") }
            partition = p
        }
        if let v = body["r"] {
            guard case .int(let n) = v, n > 0 else { throw MangoError("invalid_pos_integer", "\(MangoSort.show(v)) is not an integer greater than zero") }
        }
        if let v = body["conflicts"] { conflicts = try Self.boolean(v) }
        if let v = body["stale"], v != .string("ok"), v != .string("false"), v != .bool(false) {
            throw MangoError("invalid_ok_or_false_value", "Invalid value for stale: \(MangoSort.show(v))")
        }
        if let v = body["update"] { _ = try Self.boolean(v) }
        if let v = body["stable"] { _ = try Self.boolean(v) }
        if let v = body["execution_stats"] { executionStats = try Self.boolean(v) }
        if let v = body["allow_fallback"] { allowFallback = try Self.boolean(v) }
        if let bad = body.keys.sorted().first(where: { !known.contains($0) }) {
            throw MangoError("invalid_key", "Invalid key \(bad) for this request.")
        }
    }

    static func nonNegative(_ v: JSONValue) throws(MangoError) -> Int {
        guard case .int(let n) = v, n >= 0 else {
            throw MangoError("invalid_non_neg_integer", "\(MangoSort.show(v)) is not an integer greater than or equal to zero")
        }
        return Int(clamping: n)
    }

    static func boolean(_ v: JSONValue) throws(MangoError) -> Bool {
        guard case .bool(let b) = v else { throw MangoError("invalid_boolean", "Invalid boolean value: \(MangoSort.show(v))") }
        return b
    }

    static func useIndex(_ v: JSONValue) throws(MangoError) -> [String] {
        func invalid() -> MangoError { MangoError("invalid_index_name", "Invalid index name: \(MangoSort.show(v))") }
        switch v {
        case .null: return []
        case .string(let s):
            let parts = s.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            switch parts.count {
            case 1: return parts
            case 2: return parts[0] == "_design" ? [parts[1]] : parts
            case 3 where parts[0] == "_design": return [parts[1], parts[2]]
            default: throw invalid()
            }
        case .array(let a):
            let names = a.compactMap(\.stringValue)
            guard names.count == a.count, names.count <= 2 else { throw invalid() }
            return names
        default: throw invalid()
        }
    }
}

extension MangoSort {
    /// No sort.
    public static var none: MangoSort { MangoSort(fields: []) }

    init(fields: [Field]) { self.fields = fields }
}
