/// A Mango field name as a path into a document (CouchDB's `mango_util:parse_field`):
/// `"address.city"` is member `city` of member `address`; `\.` is a dot inside a name
/// (`"a\.b"` is the one member `a.b`); an empty segment is `invalid_field_name`. A segment
/// that is an integer indexes an array (`"tags.0"`).
public struct MangoFieldPath: Sendable, Hashable, CustomStringConvertible {
    /// The field as written.
    public let text: String
    /// Its member names (escapes removed).
    public let segments: [String]

    /// Parses `text`; throws `invalid_field_name` for an empty segment.
    public init(_ text: String) throws(MangoError) {
        self.text = text
        if !text.contains("\\") {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !parts.contains("") else { throw .invalidFieldName(text) }
            segments = parts
            return
        }
        // Split at dots not preceded by a backslash, then drop every backslash.
        var parts: [String] = []
        var current = ""
        var previous: Character?
        for ch in text {
            if ch == ".", previous != "\\" {
                parts.append(current)
                current = ""
            } else {
                current.append(ch)
            }
            previous = ch
        }
        parts.append(current)
        guard !parts.contains("") else { throw .invalidFieldName(text) }
        segments = parts.map { $0.replacingBackslashes() }
    }

    public var description: String { text }

    /// What a path finds in a value.
    public enum Lookup: Sendable, Equatable {
        case found(JSONValue)
        /// A member is missing.
        case notFound
        /// The path goes through a scalar, or indexes an array with something else than an
        /// index in range.
        case badPath
    }

    /// The value at this path in `value`.
    public func lookup(in value: JSONValue) -> Lookup {
        var current = value
        for name in segments {
            switch current {
            case .object(let o):
                guard let next = o[name] else { return .notFound }
                current = next
            case .array(let a):
                guard let i = Self.erlangInteger(name), i >= 0, i < a.count else { return .badPath }
                current = a[i]
            default:
                return .badPath
            }
        }
        return .found(current)
    }

    /// `list_to_integer`: an optional sign and decimal digits.
    static func erlangInteger(_ s: String) -> Int? {
        var body = Substring(s)
        var negative = false
        if let f = body.first, f == "+" || f == "-" {
            negative = f == "-"
            body = body.dropFirst()
        }
        guard !body.isEmpty, body.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(body) else { return nil }
        return negative ? -n : n
    }
}

extension String {
    fileprivate func replacingBackslashes() -> String { String(filter { $0 != "\\" }) }
}

extension MangoFieldPath {
    /// CouchDB's `fields` projection (`mango_fields:extract`): each path found is copied
    /// into a new document, through objects made on the way.
    public static func project(_ doc: [String: JSONValue], _ fields: [MangoFieldPath]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for f in fields {
            guard case .found(let v) = f.lookup(in: .object(doc)) else { continue }
            set(&out, f.segments[...], v)
        }
        return out
    }

    private static func set(_ o: inout [String: JSONValue], _ path: ArraySlice<String>, _ value: JSONValue) {
        guard let first = path.first else { return }
        if path.count == 1 { o[first] = value; return }
        var inner = o[first]?.objectValue ?? [:]
        set(&inner, path.dropFirst(), value)
        o[first] = .object(inner)
    }
}
