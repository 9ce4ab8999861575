/// The fixed part of a WebSocket frame (RFC 6455 §5.2): flags, opcode, mask and length.
public struct FrameHeader: Sendable, Equatable {
    /// This frame ends its message.
    public var fin: Bool
    /// The RSV1–RSV3 bits as the low three bits (RSV1 = 4).
    public var rsv: UInt8
    /// The raw 4-bit opcode (validated by the decoder).
    public var opcode: Opcode
    /// The masking key, when the frame is masked (client to server).
    public var maskKey: (UInt8, UInt8, UInt8, UInt8)?
    /// The payload length.
    public var payloadLength: Int

    /// Creates a header.
    public init(fin: Bool = true, rsv: UInt8 = 0, opcode: Opcode,
                maskKey: (UInt8, UInt8, UInt8, UInt8)? = nil, payloadLength: Int) {
        self.fin = fin; self.rsv = rsv; self.opcode = opcode
        self.maskKey = maskKey; self.payloadLength = payloadLength
    }

    /// The number of bytes this header takes on the wire.
    public var encodedLength: Int {
        let len = payloadLength < 126 ? 2 : (payloadLength <= 0xFFFF ? 4 : 10)
        return len + (maskKey == nil ? 0 : 4)
    }

    public static func == (a: FrameHeader, b: FrameHeader) -> Bool {
        a.fin == b.fin && a.rsv == b.rsv && a.opcode == b.opcode && a.payloadLength == b.payloadLength
            && a.maskKey.map { [$0.0, $0.1, $0.2, $0.3] } == b.maskKey.map { [$0.0, $0.1, $0.2, $0.3] }
    }
}

/// A complete frame with its (unmasked) payload; used by the value-level decoder, tests and fuzzers.
@_spi(Fuzzing) public struct Frame: Sendable, Equatable {
    /// The header as received.
    public var header: FrameHeader
    /// The payload, unmasked.
    public var payload: [UInt8]
    /// Creates a frame.
    public init(header: FrameHeader, payload: [UInt8]) { self.header = header; self.payload = payload }
}
