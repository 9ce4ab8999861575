/// Why a `Sec-WebSocket-Extensions` header or a permessage-deflate offer or response was refused.
/// A server declines an offer that fails (answers without it); a client fails the connection
/// on a response that fails (`WebSocketError.invalidUpgradeResponse`).
@_spi(Fuzzing) public enum ExtensionNegotiationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The header does not follow the RFC 6455 §9.1 grammar.
    case malformedHeader(String)
    /// A parameter the extension does not define.
    case unknownParameter(String)
    /// A parameter given twice in one offer or response.
    case duplicateParameter(String)
    /// A parameter with a value it must not have, or without one it needs, or out of range.
    case invalidValue(parameter: String, value: String?)
    /// A response parameter the offer did not allow (e.g. `client_max_window_bits` not offered,
    /// or a window larger than the one offered).
    case notAllowed(String)
    /// The response names an extension that was not offered, or more than one.
    case unexpectedExtension(String)

    public var description: String {
        switch self {
        case .malformedHeader(let s): return "malformed Sec-WebSocket-Extensions: \(s)"
        case .unknownParameter(let p): return "unknown extension parameter \(p)"
        case .duplicateParameter(let p): return "extension parameter \(p) given twice"
        case let .invalidValue(p, v): return "invalid value \(v.map { "\"\($0)\"" } ?? "(none)") for \(p)"
        case .notAllowed(let s): return "extension response not allowed by the offer: \(s)"
        case .unexpectedExtension(let s): return "extension not offered: \(s)"
        }
    }
}
