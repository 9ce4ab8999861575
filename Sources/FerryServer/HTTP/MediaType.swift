/// Media types as header fields carry them (RFC 9110 §8.3.1: `type/subtype` then parameters).
enum MediaType {
    /// The `type/subtype` of a `Content-Type` or `Accept` member, lowercased, parameters dropped
    /// (`Text/Plain; charset=utf-8` → `text/plain`).
    static func essence<S: StringProtocol>(_ value: S) -> String {
        (value.split(separator: ";").first ?? "").trimmingASCIIWhitespace().lowercased()
    }
}
