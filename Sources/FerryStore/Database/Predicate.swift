/// A condition on a document's JSON properties, compiled to SQL over SQLite's JSON functions
/// (`Database.documents(matching:)`). Fields are dotted paths into the body (`"address.city"`);
/// a path segment may not contain `.`, `"`, `\`, `'`, `[`, `]` or control characters.
///
/// Comparisons follow SQLite's `json_extract` values: strings compare as text, numbers as
/// numbers, `true`/`false` as 1/0; a missing field or JSON null matches no comparison (use
/// `.isNull` / `.exists`). Arrays and objects cannot be compared.
public indirect enum Predicate: Sendable, Equatable {
    /// `field == value`
    case equal(String, JSONValue)
    /// `field != value` (and the field is present and not null)
    case notEqual(String, JSONValue)
    /// `field < value`
    case less(String, JSONValue)
    /// `field <= value`
    case lessOrEqual(String, JSONValue)
    /// `field > value`
    case greater(String, JSONValue)
    /// `field >= value`
    case greaterOrEqual(String, JSONValue)
    /// `field` equals one of `values`.
    case `in`(String, [JSONValue])
    /// The field is present (any value, including null).
    case exists(String)
    /// The field is present and JSON null.
    case isNull(String)
    /// All of these.
    case and([Predicate])
    /// Any of these.
    case or([Predicate])
    /// Not this.
    case not(Predicate)
}

/// Turns predicates into SQL text plus bindings. Paths are inlined as literals (after strict
/// checking) so the expressions match those of field indexes and SQLite can use them.
struct PredicateCompiler {
    var bindings: [JSONValue] = []
    /// The database's type key: equality with a string on it compiles to the indexed
    /// `doc_type` column, which holds exactly the text values `json_extract` would give.
    var typeKey: String?

    static func jsonPath(_ field: String) throws(StoreError) -> String {
        let segments = field.split(separator: ".", omittingEmptySubsequences: false)
        guard !field.isEmpty, segments.allSatisfy({ !$0.isEmpty }) else { throw .invalidArgument("bad field path \(field.debugDescription)") }
        for s in segments {
            guard !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\")
                || $0 == UInt8(ascii: "'") || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "]") }) else {
                throw .invalidArgument("bad field path \(field.debugDescription)")
            }
        }
        return "$" + segments.map { ".\"\($0)\"" }.joined()
    }

    /// The SQL expression for a field, identical to the one used by its index.
    static func extract(_ field: String) throws(StoreError) -> String {
        "json_extract(body, '\(try jsonPath(field))')"
    }

    mutating func scalar(_ v: JSONValue) throws(StoreError) -> String {
        switch v {
        case .array, .object: throw .invalidArgument("arrays and objects cannot be compared")
        case .null: throw .invalidArgument("compare with null using .isNull")
        default:
            bindings.append(v)
            return "?"
        }
    }

    mutating func compile(_ p: Predicate) throws(StoreError) -> String {
        switch p {
        case .equal(let f, .string(let v)) where f == typeKey: return "(doc_type = \(try scalar(.string(v))))"
        case .equal(let f, let v): return "(\(try Self.extract(f)) = \(try scalar(v)))"
        case .notEqual(let f, let v): return "(\(try Self.extract(f)) != \(try scalar(v)))"
        case .less(let f, let v): return "(\(try Self.extract(f)) < \(try scalar(v)))"
        case .lessOrEqual(let f, let v): return "(\(try Self.extract(f)) <= \(try scalar(v)))"
        case .greater(let f, let v): return "(\(try Self.extract(f)) > \(try scalar(v)))"
        case .greaterOrEqual(let f, let v): return "(\(try Self.extract(f)) >= \(try scalar(v)))"
        case .in(let f, let values):
            guard !values.isEmpty else { return "0" }
            var marks: [String] = []
            for v in values { marks.append(try scalar(v)) }
            return "(\(try Self.extract(f)) IN (\(marks.joined(separator: ", "))))"
        case .exists(let f): return "(json_type(body, '\(try Self.jsonPath(f))') IS NOT NULL)"
        case .isNull(let f): return "(json_type(body, '\(try Self.jsonPath(f))') = 'null')"
        case .and(let ps):
            guard !ps.isEmpty else { return "1" }
            var parts: [String] = []
            for q in ps { parts.append(try compile(q)) }
            return "(" + parts.joined(separator: " AND ") + ")"
        case .or(let ps):
            guard !ps.isEmpty else { return "0" }
            var parts: [String] = []
            for q in ps { parts.append(try compile(q)) }
            return "(" + parts.joined(separator: " OR ") + ")"
        case .not(let q): return "(NOT \(try compile(q)))"
        }
    }
}
