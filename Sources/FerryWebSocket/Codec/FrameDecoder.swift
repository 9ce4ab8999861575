/// Which side of the connection we are; it decides masking rules.
public enum WebSocketRole: Sendable {
    /// We opened the connection: we mask, the peer must not.
    case client
    /// We accepted it: the peer must mask, we do not.
    case server
}

/// Parses frame headers and enforces the per-frame rules of RFC 6455 §5: opcodes, reserved
/// bits, control-frame limits, masking direction, length encoding and the frame-size limit.
public enum FrameHeaderParser {
    /// Parses a header at the start of `bytes`. Returns nil when more bytes are needed, or the
    /// header and its encoded length. Throws for a header that breaks the protocol.
    /// - Parameters:
    ///   - bytes: what has arrived, starting at a frame boundary.
    ///   - role: our role; a server requires masked frames, a client refuses them.
    ///   - allowedRSV: reserved bits an extension negotiated (RSV1 = 4 for permessage-deflate).
    ///   - maxFrameSize: frames with a longer payload fail with `.messageTooBig`.
    @inlinable
    public static func parse(_ bytes: UnsafeRawBufferPointer, role: WebSocketRole, allowedRSV: UInt8 = 0,
                             maxFrameSize: Int) throws(WebSocketError) -> (FrameHeader, Int)? {
        let n = bytes.count
        if n < 2 { return nil }
        let b0 = bytes[0], b1 = bytes[1]
        let rsv = (b0 >> 4) & 0x7
        guard let opcode = Opcode(rawValue: b0 & 0x0F) else {
            throw .protocolError("reserved opcode 0x\(String(b0 & 0x0F, radix: 16))")
        }
        if rsv & ~allowedRSV != 0 { throw .protocolError("reserved bits set without an extension") }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        if opcode.isControl {
            if !fin { throw .protocolError("fragmented control frame") }
            if rsv != 0 { throw .protocolError("reserved bits on a control frame") }
        }
        switch role {
        case .server where !masked: throw .protocolError("unmasked frame from a client")
        case .client where masked: throw .protocolError("masked frame from a server")
        default: break
        }
        var len = Int(b1 & 0x7F)
        var offset = 2
        if len == 126 {
            if n < 4 { return nil }
            len = Int(bytes[2]) << 8 | Int(bytes[3])
            offset = 4
        } else if len == 127 {
            if n < 10 { return nil }
            var v: UInt64 = 0
            for i in 2..<10 { v = v << 8 | UInt64(bytes[i]) }
            if v & (1 << 63) != 0 { throw .protocolError("64-bit length with the high bit set") }
            if v > UInt64(maxFrameSize) { throw .messageTooBig(limit: maxFrameSize) }
            len = Int(v)
            offset = 10
        }
        if opcode.isControl && len > 125 { throw .protocolError("control frame longer than 125 bytes") }
        if len > maxFrameSize { throw .messageTooBig(limit: maxFrameSize) }
        var key: (UInt8, UInt8, UInt8, UInt8)?
        if masked {
            if n < offset + 4 { return nil }
            key = (bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3])
            offset += 4
        }
        return (FrameHeader(fin: fin, rsv: rsv, opcode: opcode, maskKey: key, payloadLength: len), offset)
    }
}

/// A value-level frame decoder: feed it bytes, take complete frames out. It checks each
/// frame on its own (not the message-level rules, which `WebSocketStateMachine` enforces).
/// Used by tests, golden vectors and the fuzz target; the connection uses the streaming path
/// in `WebSocketStateMachine` to avoid copies.
@_spi(Fuzzing) public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Our role (decides which masking the peer must use).
    public let role: WebSocketRole
    /// Frames with a longer payload fail with `.messageTooBig`.
    public let maxFrameSize: Int
    /// Reserved bits an extension negotiated.
    public let allowedRSV: UInt8

    /// Creates a decoder.
    public init(role: WebSocketRole, maxFrameSize: Int = 16 << 20, allowedRSV: UInt8 = 0) {
        self.role = role; self.maxFrameSize = maxFrameSize; self.allowedRSV = allowedRSV
    }

    /// Appends received bytes.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame (payload unmasked), nil if more bytes are needed.
    public mutating func next() throws(WebSocketError) -> Frame? {
        let available = buffer.count - start
        let (from, role, allowedRSV, maxFrameSize) = (self.start, self.role, self.allowedRSV, self.maxFrameSize)
        let parsed = try buffer.withUnsafeBytes { raw in
            Result { () throws(WebSocketError) in
                try FrameHeaderParser.parse(UnsafeRawBufferPointer(rebasing: raw[from...]), role: role,
                                            allowedRSV: allowedRSV, maxFrameSize: maxFrameSize)
            }
        }.get()
        guard let (header, headerLength) = parsed, available >= headerLength + header.payloadLength else { return nil }
        var payload = Array(buffer[(start + headerLength)..<(start + headerLength + header.payloadLength)])
        if let k = header.maskKey { Masking.apply(key: k, to: &payload) }
        start += headerLength + header.payloadLength
        if start > 65536 && start * 2 > buffer.count { buffer.removeFirst(start); start = 0 }
        return Frame(header: header, payload: payload)
    }
}
