/// A parsed JSON value, for the places that need values rather than bytes: validators,
/// conflict resolvers, conflict handlers, queries and documents built in code.
///
/// Integers that fit in `Int64` stay integers; every other number is a `Double`. Objects are
/// dictionaries: key order carries no meaning, and `CanonicalJSON` writes keys sorted bytewise.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The integer, if this is an integer (or a double with an exact integer value).
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d): return Int64(exactly: d)
        default: return nil
        }
    }
    /// The number as a double, if this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    /// The boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The object's members, if this is an object.
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o } else { return nil } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
