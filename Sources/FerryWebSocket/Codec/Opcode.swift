/// A WebSocket frame opcode (RFC 6455 §5.2).
public enum Opcode: UInt8, Sendable {
    /// A continuation of a fragmented message.
    case continuation = 0x0
    /// The first frame of a text message.
    case text = 0x1
    /// The first frame of a binary message.
    case binary = 0x2
    /// Close handshake.
    case close = 0x8
    /// Ping (answered automatically with a pong).
    case ping = 0x9
    /// Pong.
    case pong = 0xA

    /// Control frames (close, ping, pong) may not be fragmented and carry at most 125 bytes.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}
