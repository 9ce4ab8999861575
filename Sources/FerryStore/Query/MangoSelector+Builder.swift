/// A typed way to write selectors in Swift, the same selectors the JSON form gives:
///
/// ```swift
/// let query = MangoQuery(selector: .field("type", .equals("task")) && .field("prio", .atLeast(2))
///                                  && !.field("owner.name", .isIn(["molly", "naomi"])))
/// ```
///
/// A negation is pushed down as CouchDB's normalization does (`!(a < 3)` is `a >= 3`), so the
/// planner sees the same selector as for `{"$not": …}`.
extension MangoSelector {
    /// `$eq`: equal in CouchDB's collation.
    public static func equals(_ value: JSONValue) -> MangoSelector { .condition("$eq", value) }
    /// `$ne`.
    public static func notEquals(_ value: JSONValue) -> MangoSelector { .condition("$ne", value) }
    /// `$lt`.
    public static func lessThan(_ value: JSONValue) -> MangoSelector { .condition("$lt", value) }
    /// `$lte`.
    public static func atMost(_ value: JSONValue) -> MangoSelector { .condition("$lte", value) }
    /// `$gt`.
    public static func greaterThan(_ value: JSONValue) -> MangoSelector { .condition("$gt", value) }
    /// `$gte`.
    public static func atLeast(_ value: JSONValue) -> MangoSelector { .condition("$gte", value) }
    /// `$exists`.
    public static func exists(_ present: Bool = true) -> MangoSelector { .condition("$exists", .bool(present)) }
    /// `$type`: `"null"`, `"boolean"`, `"number"`, `"string"`, `"array"` or `"object"`.
    public static func isType(_ name: String) -> MangoSelector { .condition("$type", .string(name)) }
    /// `$in`.
    public static func isIn(_ values: [JSONValue]) -> MangoSelector { .condition("$in", .array(values)) }
    /// `$nin`.
    public static func notIn(_ values: [JSONValue]) -> MangoSelector { .condition("$nin", .array(values)) }
    /// `$size`: an array of this many elements.
    public static func hasSize(_ count: Int) -> MangoSelector { .condition("$size", .int(Int64(count))) }
    /// `$mod`: an integer with this remainder.
    public static func modulo(_ divisor: Int, is remainder: Int) -> MangoSelector {
        .condition("$mod", .array([.int(Int64(divisor)), .int(Int64(remainder))]))
    }
    /// `$regex`: a string the pattern matches (PCRE syntax, as CouchDB's).
    public static func matches(regex pattern: String) -> MangoSelector { .condition("$regex", .string(pattern)) }
    /// `$all`: an array holding every one of these.
    public static func containsAll(_ values: [JSONValue]) -> MangoSelector { .condition("$all", .array(values)) }
    /// `$beginsWith`: a string with this prefix.
    public static func beginsWith(_ prefix: String) -> MangoSelector { .condition("$beginsWith", .string(prefix)) }

    /// Both (`$and`, flattened).
    public static func && (a: MangoSelector, b: MangoSelector) -> MangoSelector {
        var parts: [MangoSelector] = []
        for s in [a, b] {
            if case .and(let inner) = s { parts += inner } else if s != .all { parts.append(s) }
        }
        return parts.isEmpty ? .all : parts.count == 1 ? parts[0] : .and(parts)
    }

    /// Either (`$or`, flattened).
    public static func || (a: MangoSelector, b: MangoSelector) -> MangoSelector {
        var parts: [MangoSelector] = []
        for s in [a, b] {
            if case .or(let inner) = s { parts += inner } else { parts.append(s) }
        }
        return .or(parts)
    }

    /// Not (`$not`), normalized as the JSON form's is.
    public static prefix func ! (s: MangoSelector) -> MangoSelector {
        // The JSON form's normalization is the one definition of pushing a negation down; a
        // selector built from valid parts always parses.
        (try? MangoSelector(json: .object(["$not": s.json]))) ?? .not(s)
    }
}

extension MangoFieldPath: ExpressibleByStringLiteral {
    /// A path written in code (`"address.city"`); an empty segment there is a programming
    /// error. Paths from outside go through the throwing `init(_:)`.
    public init(stringLiteral text: String) {
        do { try self.init(text) } catch { preconditionFailure("invalid Mango field path literal \(text.debugDescription): \(error)") }
    }
}
