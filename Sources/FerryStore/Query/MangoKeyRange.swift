/// The rows of an index a selector can match, as bounds on the entry keys (`CollationKey`
/// bytes of the columns, then the document ID): the leading columns the selector fixes with
/// `$eq`, then the first other column's `$gt`/`$gte`/`$lt`/`$lte` — CouchDB's
/// `mango_idx_view` ranges. Every matching row lies inside; rows inside are still matched
/// against the whole selector, so the bounds only need to hold every match.
struct MangoKeyRange: Equatable {
    /// The least key in the range.
    var lower: [UInt8] = []
    /// The least key above the range (every key starts with a tag below 0xFF).
    var upper: [UInt8] = [CollationKey.after]

    /// The range of an index with `columns` for `selector`.
    init(columns: [String], selector: MangoSelector) {
        let conditions = Self.conditions(selector)
        var prefix: [UInt8] = []
        for column in columns {
            // `_id` and `_rev` compare as Erlang terms, not in the collation (MangoSelector's
            // matching): no bounds from them.
            if column == "_id" || column == "_rev" { break }
            let cs = conditions[column] ?? []
            if let eq = cs.first(where: { $0.op == "$eq" }) {
                CollationKey.append(eq.value, to: &prefix)
                continue
            }
            lower = prefix
            upper = prefix + [CollationKey.after]
            for c in cs {
                var bound = prefix
                CollationKey.append(c.value, to: &bound)
                switch c.op {
                case "$gt": raiseLower(to: bound + [CollationKey.after])
                case "$gte": raiseLower(to: bound)
                case "$lt": lowerUpper(to: bound)
                case "$lte": lowerUpper(to: bound + [CollationKey.after])
                default: break
                }
            }
            return
        }
        lower = prefix
        upper = prefix + [CollationKey.after]
    }

    /// Starts the range at `key` (a bookmark's row, for an ascending scan).
    mutating func raiseLower(to key: [UInt8]) {
        if lower.lexicographicallyPrecedes(key) { lower = key }
    }

    /// Ends the range before `key`.
    mutating func lowerUpper(to key: [UInt8]) {
        if key.lexicographicallyPrecedes(upper) { upper = key }
    }

    /// Ends the range after `key` (a bookmark's row, for a descending scan): the least key
    /// above it is `key` followed by a zero byte.
    mutating func endAfter(_ key: [UInt8]) {
        lowerUpper(to: key + [0])
    }

    /// The top-level `field op value` conditions of a selector, by field.
    static func conditions(_ selector: MangoSelector) -> [String: [(op: String, value: JSONValue)]] {
        var out: [String: [(op: String, value: JSONValue)]] = [:]
        for c in MangoPlanner.conjuncts(selector) {
            if case .field(let p?, .condition(let op, let v)) = c { out[p.text, default: []].append((op, v)) }
        }
        return out
    }

    /// SQL conditions on `docs.doc_id` for `_all_docs`: the selector's comparisons of `_id`
    /// with strings (byte order, as both SQLite's and Erlang's), at most four — the rows are
    /// matched against the whole selector anyway, and a bounded number of shapes keeps the
    /// reader connections' statement caches bounded whatever selectors clients send.
    static func idConditions(_ selector: MangoSelector) -> [(sql: String, value: String)] {
        var out: [(sql: String, value: String)] = []
        for c in (conditions(selector)["_id"] ?? []).prefix(4) {
            guard case .string(let v) = c.value else { continue }
            switch c.op {
            case "$eq": out.append(("doc_id = ?", v))
            case "$gt": out.append(("doc_id > ?", v))
            case "$gte": out.append(("doc_id >= ?", v))
            case "$lt": out.append(("doc_id < ?", v))
            case "$lte": out.append(("doc_id <= ?", v))
            default: break
            }
        }
        return out
    }
}
