import Configuration
import FerryStore

/// A `--config` file for swift-configuration's `FileProvider`, parsed with Ferry's own JSON
/// parser (swift-configuration's `JSONSnapshot` uses Foundation's `JSONSerialization`, which
/// would link all of Foundation and ICU's locale data into `ferry`). Nested objects become
/// dot-separated keys (`{"tls": {"cert": …}}` is `tls.cert`), as `JSONSnapshot` makes them.
struct JSONConfigSnapshot: FileConfigSnapshot {
    /// No options: values are taken as written, none is a secret.
    struct ParsingOptions: FileParsingOptions {
        static var `default`: ParsingOptions { ParsingOptions() }
    }

    /// A value of another type than the one asked for (the reader then answers nil).
    struct TypeMismatch: Error, CustomStringConvertible {
        let key: String
        let type: ConfigType
        var description: String { "\(key) is not a \(type)" }
    }

    let providerName: String
    private let values: [String: JSONValue]

    init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        let bytes = data.withUnsafeBytes { Array($0) }
        var flat: [String: JSONValue] = [:]
        func flatten(_ object: [String: JSONValue], _ prefix: String) {
            for (key, value) in object {
                if case .object(let inner) = value { flatten(inner, prefix + key + ".") } else { flat[prefix + key] = value }
            }
        }
        flatten(try JSONParser.parseObject(bytes, sizeLimit: bytes.count + 1), "")
        self.providerName = providerName
        values = flat
    }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let name = key.components.joined(separator: ".")
        guard let value = values[name] else { return LookupResult(encodedKey: name, value: nil) }
        let mismatch = TypeMismatch(key: name, type: type)
        func scalars<T>(_ one: (JSONValue) -> T?) throws -> [T] {
            guard case .array(let items) = value else { throw mismatch }
            return try items.map { item in
                guard let v = one(item) else { throw mismatch }
                return v
            }
        }
        let content: ConfigContent
        switch type {
        case .string:
            guard let s = value.stringValue else { throw mismatch }
            content = .string(s)
        case .int:
            guard let i = Self.int(value) else { throw mismatch }
            content = .int(i)
        case .double:
            guard let d = Self.double(value) else { throw mismatch }
            content = .double(d)
        case .bool:
            guard case .bool(let b) = value else { throw mismatch }
            content = .bool(b)
        case .stringArray: content = .stringArray(try scalars { $0.stringValue })
        case .intArray: content = .intArray(try scalars(Self.int))
        case .doubleArray: content = .doubleArray(try scalars(Self.double))
        case .boolArray: content = .boolArray(try scalars { if case .bool(let b) = $0 { b } else { nil } })
        default: throw mismatch
        }
        return LookupResult(encodedKey: name, value: ConfigValue(content, isSecret: false))
    }

    var description: String { "\(providerName)[\(values.count) values]" }
    var debugDescription: String { description }

    private static func int(_ v: JSONValue) -> Int? {
        switch v {
        case .int(let i): Int(exactly: i)
        case .double(let d): Int(exactly: d)
        default: nil
        }
    }

    private static func double(_ v: JSONValue) -> Double? {
        switch v {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
}
