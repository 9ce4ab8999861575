/// A Mango query refused, as CouchDB 3.5 names it (`mango_error`): the HTTP status, the
/// `error` member (`bad_arg`, `invalid_operator`, `no_usable_index`, …) and a reason.
public struct MangoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status CouchDB answers with (400 but for a missing index, 404).
    public let status: Int
    /// CouchDB's error name.
    public let error: String
    /// A sentence for people.
    public let reason: String

    /// An error with CouchDB's `status`, `error` name and `reason`.
    public init(_ status: Int, _ error: String, _ reason: String) {
        self.status = status
        self.error = error
        self.reason = reason
    }

    /// A 400 with CouchDB's `error` name and `reason`.
    public init(_ error: String, _ reason: String) {
        self.init(400, error, reason)
    }

    public var description: String { "\(error): \(reason)" }

    static func badArg(_ op: String, _ arg: JSONValue) -> MangoError {
        MangoError("bad_arg", "Bad argument for operator \(op): \(String(decoding: CanonicalJSON.encode(arg), as: UTF8.self))")
    }

    /// `use_index` names an index that cannot serve the query, and no fallback is allowed.
    public static func invalidIndex(_ asked: [String]) -> MangoError {
        let named = asked.count == 1 ? "_design/\(asked[0])" : "_design/\(asked[0]), \(asked[1])"
        return MangoError("invalid_index", "\(named) specified by `use_index` could not be found or it is not suitable.")
    }

    static func invalidOperator(_ op: String) -> MangoError { MangoError("invalid_operator", "Invalid operator: \(op)") }

    static func invalidFieldName(_ field: String) -> MangoError { MangoError("invalid_field_name", "Invalid field name: \(field)") }
}
