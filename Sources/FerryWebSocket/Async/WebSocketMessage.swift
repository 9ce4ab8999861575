/// A complete WebSocket data message, owned (copied out of the read buffer).
public enum WebSocketMessage: Sendable, Equatable {
    /// A text message.
    case text(String)
    /// A binary message.
    case binary([UInt8])

    /// The message's bytes (UTF-8 for text).
    public var bytes: [UInt8] {
        switch self {
        case .text(let s): return Array(s.utf8)
        case .binary(let b): return b
        }
    }

    /// Text or binary.
    public var kind: MessageKind {
        if case .text = self { return .text }
        return .binary
    }
}
