extension MangoSelector {
    /// Whether `document` (a document's whole JSON object, `_id` included) matches, as
    /// CouchDB's `mango_selector:match` decides: comparisons in CouchDB's collation
    /// (`CouchCollation`), but on `_id` in plain byte order.
    public func matches(_ document: JSONValue) -> Bool {
        (try? Self.match(self, document, raw: false)) ?? false
    }

    /// Whether a document's current revision matches (its body with `_id`, `_rev` and, for
    /// a deletion, `_deleted`).
    public func matches(_ document: Document) -> Bool {
        matches(Database.mangoJSON(document))
    }

    /// A matcher that gave up (an operator its position does not allow, a `$mod` by zero):
    /// inside `$elemMatch` and its kind the element does not match; at the top, nothing does.
    struct MatchFailure: Error {}

    static func match(_ s: MangoSelector, _ value: JSONValue, raw: Bool) throws(MatchFailure) -> Bool {
        switch s {
        case .all: return true
        case .and(let parts):
            for p in parts where !(try match(p, value, raw: raw)) { return false }
            return true
        case .or(let parts):
            if parts.isEmpty { return true }
            for p in parts where try match(p, value, raw: raw) { return true }
            return false
        case .not(let inner): return !(try match(inner, value, raw: raw))
        case .nor: throw MatchFailure()
        case .field(let path, let cond):
            guard let path else { return try match(cond, value, raw: raw) }
            switch path.lookup(in: value) {
            case .notFound:
                if case .condition("$exists", .bool(false)) = cond { return true }
                return false
            case .badPath: return false
            case .found(let sub): return try match(cond, sub, raw: raw || path.text == "_id")
            }
        case .elemMatch(let inner):
            guard case .array(let items) = value else { return false }
            for item in items where (try? match(inner, item, raw: raw)) == true { return true }
            return false
        case .allMatch(let inner):
            guard case .array(let items) = value, !items.isEmpty else { return false }
            for item in items where (try? match(inner, item, raw: raw)) != true { return false }
            return true
        case .keyMapMatch(let inner):
            guard case .object(let o) = value else { return false }
            for key in o.keys where (try? match(inner, .string(key), raw: raw)) == true { return true }
            return false
        case .condition(let op, let arg):
            return try condition(op, arg, value, raw: raw)
        }
    }

    private static func condition(_ op: String, _ arg: JSONValue, _ value: JSONValue, raw: Bool) throws(MatchFailure) -> Bool {
        func cmp(_ a: JSONValue, _ b: JSONValue) -> Int {
            raw ? ErlangTermOrder.compare(a, b) : CouchCollation.compare(a, b)
        }
        switch op {
        case "$lt": return cmp(value, arg) < 0
        case "$lte": return cmp(value, arg) <= 0
        case "$eq": return cmp(value, arg) == 0
        case "$ne": return cmp(value, arg) != 0
        case "$gte": return cmp(value, arg) >= 0
        case "$gt": return cmp(value, arg) > 0
        case "$in", "$nin":
            let args = arg.arrayValue ?? []
            let found: Bool
            if case .array(let values) = value {
                found = args.contains { a in values.contains { cmp($0, a) == 0 } }
            } else {
                found = args.contains { cmp(value, $0) == 0 }
            }
            if args.isEmpty { return op == "$nin" }
            return op == "$in" ? found : !found
        case "$exists":
            // Found (a missing field was decided by the caller).
            return arg.boolValue == true
        case "$type":
            return arg.stringValue == typeName(value)
        case "$mod":
            guard case .int(let v) = value, case .array(let a) = arg, a.count == 2,
                  case .int(let d) = a[0], case .int(let r) = a[1] else { return false }
            guard d != 0 else { throw MatchFailure() }
            return v % d == r
        case "$regex":
            guard case .string(let s) = value, case .string(let pattern) = arg, let re = MangoRegex.compiled(pattern) else { return false }
            return re.matches(s)
        case "$size":
            guard case .array(let items) = value, case .int(let n) = arg else { return false }
            return items.count == n
        case "$beginsWith":
            guard case .string(let s) = value, case .string(let prefix) = arg else { return false }
            return s.unicodeScalars.starts(with: prefix.unicodeScalars)
        case "$all":
            guard case .array(let values) = value, case .array(let args) = arg, !args.isEmpty else { return false }
            // Members exactly as Erlang's `lists:member` finds them; or the one argument that
            // is an array equal to the whole value.
            if args.allSatisfy({ a in values.contains(a) }) { return true }
            if args.count == 1, case .array = args[0] { return ErlangTermOrder.compare(args[0], value) == 0 }
            return false
        default:
            throw MatchFailure()
        }
    }

    /// `$type`'s names.
    static func typeName(_ v: JSONValue) -> String {
        switch v {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// Erlang's order of terms as CouchDB compares `_id` conditions (`mango_json:cmp_raw`), JSON
/// decoded as CouchDB decodes it: numbers < `false` < `null` < `true` (atoms, by name) <
/// objects < arrays < strings; strings byte by byte.
enum ErlangTermOrder {
    static func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
        let ra = rank(a), rb = rank(b)
        guard ra == rb else { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : (x.utf8.elementsEqual(y.utf8) ? 0 : 1)
        case (.array(let x), .array(let y)):
            return CouchCollation.compareElements(x, y, by: compare)
        case (.object(let x), .object(let y)):
            // Member lists, compared pair by pair (name, then value), in name order.
            let kx = x.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let ky = y.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (p, q) in zip(kx, ky) {
                let c = compare(.string(p), .string(q))
                if c != 0 { return c }
                let v = compare(x[p] ?? .null, y[q] ?? .null)
                if v != 0 { return v }
            }
            return kx.count == ky.count ? 0 : (kx.count < ky.count ? -1 : 1)
        case (.bool, _), (.null, _):
            return 0
        default:
            return CouchCollation.compareNumbers(a, b)
        }
    }

    private static func rank(_ v: JSONValue) -> Int {
        switch v {
        case .int, .double: 0
        case .bool(false): 1
        case .null: 2
        case .bool(true): 3
        case .object: 4
        case .array: 5
        case .string: 6
        }
    }
}
