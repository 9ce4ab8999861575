/// A WebSocket close status code (RFC 6455 §7.4).
public struct CloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code.
    public var rawValue: UInt16
    /// Wraps a numeric code.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// Wraps a numeric code.
    public init(_ code: UInt16) { rawValue = code }

    /// 1000: the purpose of the connection is fulfilled.
    public static let normalClosure = CloseCode(1000)
    /// 1001: the endpoint is going away (server shutdown, page navigation).
    public static let goingAway = CloseCode(1001)
    /// 1002: the peer broke the protocol.
    public static let protocolError = CloseCode(1002)
    /// 1003: a message of a type the endpoint cannot accept.
    public static let unsupportedData = CloseCode(1003)
    /// 1005: no code was present (never sent; reported when the close frame had none).
    public static let noStatusReceived = CloseCode(1005)
    /// 1006: the connection dropped without a close frame (never sent).
    public static let abnormalClosure = CloseCode(1006)
    /// 1007: a text message was not valid UTF-8.
    public static let invalidFramePayloadData = CloseCode(1007)
    /// 1008: a policy was violated.
    public static let policyViolation = CloseCode(1008)
    /// 1009: a frame or message exceeded the configured limit.
    public static let messageTooBig = CloseCode(1009)
    /// 1010: the client expected an extension the server did not negotiate.
    public static let mandatoryExtension = CloseCode(1010)
    /// 1011: the endpoint hit an unexpected condition (BLIP uses this for its protocol errors).
    public static let internalError = CloseCode(1011)

    /// Whether the code may appear in a close frame on the wire (RFC 6455 §7.4.1–7.4.2 and the
    /// IANA registry): 1000–1003, 1007–1014, and 3000–4999.
    public var isValidOnWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    public var description: String { String(rawValue) }
}
