/// A Mango selector, normalized as CouchDB 3.5 normalizes it (`mango_selector:normalize`):
/// implicit `$and` and `$eq` made explicit, field names pushed down to the conditions and
/// joined into paths (`{"a":{"b":{"$gt":1}}}` is `a.b > 1`), and `$not`/`$nor` pushed down to
/// the conditions by De Morgan's laws (`$not` of `$lt` is `$gte`, of `$in` is `$nin`, of
/// `$exists: true` is `$exists: false`; others keep a `$not`).
///
/// Build one from CouchDB's JSON form with `init(json:)` (errors as CouchDB names them), or
/// in Swift with the operators (`.field("age", .greaterThan(21))`).
public indirect enum MangoSelector: Sendable, Equatable {
    /// `{}`: every document.
    case all
    /// Every one of these (an empty list matches).
    case and([MangoSelector])
    /// Any of these (an empty list matches, as CouchDB's does).
    case or([MangoSelector])
    /// Not this.
    case not(MangoSelector)
    /// The condition on the value at a path (nil: the value itself, inside `$elemMatch`).
    case field(MangoFieldPath?, MangoSelector)
    /// A condition operator on the value (`$eq`, `$lt`, `$in`, `$exists`, `$regex`, …) and its
    /// argument.
    case condition(String, JSONValue)
    /// Some element of an array matches.
    case elemMatch(MangoSelector)
    /// Every element of a non-empty array matches.
    case allMatch(MangoSelector)
    /// Some member name of an object matches.
    case keyMapMatch(MangoSelector)
    /// `$nor`: none of these. Normalized away but for inside `$elemMatch`, where CouchDB
    /// leaves it (and its matcher then refuses it: such an element never matches).
    case nor([MangoSelector])

    /// A selector from its JSON form, validated and normalized as CouchDB does.
    public init(json: JSONValue) throws(MangoError) {
        guard case .object(let o) = json else {
            throw MangoError("invalid_selector_json", "Selector must be a JSON object, not: \(String(decoding: CanonicalJSON.encode(json), as: UTF8.self))")
        }
        if o.isEmpty { self = .all; return }
        let ops = try Self.normOps(json)
        let fields = try Self.normFields(ops, path: "")
        let normalized = try MangoSelector(Self.normNegations(fields))
        // CouchDB refuses a condition with no field at the top (`{"$gt": 1}`).
        if case .field(nil, _) = normalized {
            throw MangoError("invalid_selector", "One or more conditions is missing a field name.")
        }
        self = normalized
    }

    // MARK: Normalization (mango_selector's three steps)

    /// Step 1: each operator checked, implicit `$and` and `$eq` made explicit. Field names
    /// are kept as `.field` with a raw name (joined into paths by step 2).
    private static func normOps(_ value: JSONValue) throws(MangoError) -> Raw {
        guard case .object(let o) = value, !o.isEmpty else { return .condition("$eq", value) }
        if o.count > 1 {
            // Members in name order: Ferry's objects keep none (the results do not depend on it).
            var parts: [Raw] = []
            for key in o.keys.sorted() { parts.append(try normOps(.object([key: o[key] ?? .null]))) }
            return .and(parts)
        }
        guard let (key, arg) = o.first else { return .condition("$eq", value) }
        switch key {
        case "$and", "$or", "$nor":
            guard case .array(let items) = arg else { throw .badArg(key, arg) }
            var parts: [Raw] = []
            for item in items { parts.append(try normOps(item)) }
            return key == "$and" ? .and(parts) : key == "$or" ? .or(parts) : .nor(parts)
        case "$not":
            guard case .object = arg else { throw .badArg(key, arg) }
            return .not(try normOps(arg))
        case "$in", "$nin", "$all":
            guard case .array = arg else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$exists":
            guard case .bool = arg else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$type", "$beginsWith":
            guard case .string = arg else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$mod":
            guard case .array(let a) = arg, a.count == 2, case .int = a[0], case .int = a[1] else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$regex":
            guard case .string(let pattern) = arg, MangoRegex.compiled(pattern) != nil else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$size":
            guard case .int(let n) = arg, n >= 0 else { throw .badArg(key, arg) }
            return .condition(key, arg)
        case "$elemMatch", "$allMatch", "$keyMapMatch":
            guard case .object = arg else { throw .badArg(key, arg) }
            let inner = try normOps(arg)
            return key == "$elemMatch" ? .elemMatch(inner) : key == "$allMatch" ? .allMatch(inner) : .keyMapMatch(inner)
        case "$lt", "$lte", "$eq", "$ne", "$gte", "$gt":
            return .condition(key, arg)
        case "$text":
            throw MangoError("no_usable_index", "No text index exists for $text: Ferry has json indexes only.")
        case "$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere":
            throw MangoError("not_supported", "Unsupported operator: \(key)")
        default:
            if key.hasPrefix("$") { throw .invalidOperator(key) }
            return .field(key, try normOps(arg))
        }
    }

    /// Step 2: field names joined into paths down to the conditions they apply to (through
    /// `$and $or $not $nor`; `$elemMatch` and its kind start afresh inside).
    private static func normFields(_ r: Raw, path: String) throws(MangoError) -> Raw {
        switch r {
        case .and(let a): var out: [Raw] = []; for x in a { out.append(try normFields(x, path: path)) }; return .and(out)
        case .or(let a): var out: [Raw] = []; for x in a { out.append(try normFields(x, path: path)) }; return .or(out)
        case .nor(let a): var out: [Raw] = []; for x in a { out.append(try normFields(x, path: path)) }; return .nor(out)
        case .not(let x): return .not(try normFields(x, path: path))
        case .elemMatch(let x): return .field(path, .elemMatch(try normFields(x, path: "")))
        case .allMatch(let x): return .field(path, .allMatch(try normFields(x, path: "")))
        case .keyMapMatch(let x): return .field(path, .keyMapMatch(try normFields(x, path: "")))
        case .condition: return .field(path, r)
        case .field(let name, let cond): return try normFields(cond, path: path.isEmpty ? name : path + "." + name)
        }
    }

    /// Step 3: negations moved down to the conditions.
    private static func normNegations(_ r: Raw) -> Raw {
        switch r {
        case .not(let x): return negate(x)
        case .nor(let a): return .and(a.map(negate))
        case .and(let a): return .and(a.map(normNegations))
        case .or(let a): return .or(a.map(normNegations))
        case .elemMatch(let x): return .elemMatch(normNegations(x))
        case .allMatch(let x): return .allMatch(normNegations(x))
        case .keyMapMatch(let x): return .keyMapMatch(normNegations(x))
        default: return r
        }
    }

    private static func negate(_ r: Raw) -> Raw {
        switch r {
        case .not(let x): return normNegations(x)
        case .nor(let a): return .or(a.map(normNegations))
        case .and(let a): return .or(a.map(negate))
        case .or(let a): return .and(a.map(negate))
        case .condition(let op, let arg):
            switch op {
            case "$lt": return .condition("$gte", arg)
            case "$lte": return .condition("$gt", arg)
            case "$eq": return .condition("$ne", arg)
            case "$ne": return .condition("$eq", arg)
            case "$gte": return .condition("$lt", arg)
            case "$gt": return .condition("$lte", arg)
            case "$in": return .condition("$nin", arg)
            case "$nin": return .condition("$in", arg)
            case "$exists": return .condition("$exists", .bool(arg.boolValue != true))
            default: return .not(r)
            }
        case .elemMatch, .allMatch, .keyMapMatch: return .not(r)
        case .field(let name, let cond): return .field(name, negate(cond))
        }
    }
}

/// A selector between normalization steps: field names as written.
private indirect enum Raw {
    case and([Raw]), or([Raw]), nor([Raw]), not(Raw)
    case field(String, Raw)
    case condition(String, JSONValue)
    case elemMatch(Raw), allMatch(Raw), keyMapMatch(Raw)
}

extension MangoSelector {
    fileprivate init(_ raw: Raw) throws(MangoError) {
        switch raw {
        case .and(let a): var out: [MangoSelector] = []; for x in a { out.append(try MangoSelector(x)) }; self = .and(out)
        case .or(let a): var out: [MangoSelector] = []; for x in a { out.append(try MangoSelector(x)) }; self = .or(out)
        case .nor(let a): var out: [MangoSelector] = []; for x in a { out.append(try MangoSelector(x)) }; self = .nor(out)
        case .not(let x): self = .not(try MangoSelector(x))
        case .field(let name, let cond): self = .field(name.isEmpty ? nil : try MangoFieldPath(name), try MangoSelector(cond))
        case .condition(let op, let arg): self = .condition(op, arg)
        case .elemMatch(let x): self = .elemMatch(try MangoSelector(x))
        case .allMatch(let x): self = .allMatch(try MangoSelector(x))
        case .keyMapMatch(let x): self = .keyMapMatch(try MangoSelector(x))
        }
    }
}

extension MangoSelector {
    /// The normalized selector in CouchDB's JSON form (what `_explain` shows).
    public var json: JSONValue {
        switch self {
        case .all: return .object([:])
        case .and(let parts): return .object(["$and": .array(parts.map(\.json))])
        case .or(let parts): return .object(["$or": .array(parts.map(\.json))])
        case .nor(let parts): return .object(["$nor": .array(parts.map(\.json))])
        case .not(let inner): return .object(["$not": inner.json])
        case .field(let path, let cond): return .object([path?.text ?? "": cond.json])
        case .condition(let op, let arg): return .object([op: arg])
        case .elemMatch(let inner): return .object(["$elemMatch": inner.json])
        case .allMatch(let inner): return .object(["$allMatch": inner.json])
        case .keyMapMatch(let inner): return .object(["$keyMapMatch": inner.json])
        }
    }
}
