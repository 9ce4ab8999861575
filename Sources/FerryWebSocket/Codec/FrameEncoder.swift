/// Writes WebSocket frame headers (and whole frames for tests and small control frames).
public enum FrameEncoder {
    /// The largest header: 2 + 8 (length) + 4 (mask).
    public static let maxHeaderLength = 14

    /// Writes `header` into `out` (at least `maxHeaderLength` bytes); returns the bytes written.
    @inlinable
    public static func writeHeader(_ header: FrameHeader, into out: UnsafeMutableRawBufferPointer) -> Int {
        out[0] = (header.fin ? 0x80 : 0) | (header.rsv & 0x7) << 4 | header.opcode.rawValue
        let maskBit: UInt8 = header.maskKey == nil ? 0 : 0x80
        let len = header.payloadLength
        var i: Int
        if len < 126 {
            out[1] = maskBit | UInt8(len); i = 2
        } else if len <= 0xFFFF {
            out[1] = maskBit | 126
            out[2] = UInt8(len >> 8); out[3] = UInt8(len & 0xFF); i = 4
        } else {
            out[1] = maskBit | 127
            let v = UInt64(len)
            for j in 0..<8 { out[2 + j] = UInt8(truncatingIfNeeded: v >> (56 - 8 * j)) }
            i = 10
        }
        if let k = header.maskKey {
            out[i] = k.0; out[i + 1] = k.1; out[i + 2] = k.2; out[i + 3] = k.3; i += 4
        }
        return i
    }

    /// Encodes a whole frame; the payload is masked when the header has a key.
    public static func encode(_ header: FrameHeader, payload: [UInt8]) -> [UInt8] {
        var h = header
        h.payloadLength = payload.count
        var out = [UInt8](repeating: 0, count: h.encodedLength + payload.count)
        out.withUnsafeMutableBytes { raw in
            let n = writeHeader(h, into: raw)
            payload.withUnsafeBytes { p in raw.baseAddress!.advanced(by: n).copyMemory(from: p.baseAddress ?? UnsafeRawPointer(raw.baseAddress!), byteCount: p.count) }
            if let k = h.maskKey { Masking.apply(key: k, to: UnsafeMutableRawBufferPointer(rebasing: raw[n...])) }
        }
        return out
    }

    /// A close frame payload: the code (big-endian) and the reason, truncated to fit 125 bytes
    /// on a UTF-8 boundary.
    public static func closePayload(code: CloseCode?, reason: String) -> [UInt8] {
        guard let code else { return [] }
        var out: [UInt8] = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)]
        var r = Array(reason.utf8)
        if r.count > 123 {
            var cut = 123
            while cut > 0 && (r[cut] & 0xC0) == 0x80 { cut -= 1 }
            r = Array(r[..<cut])
        }
        out.append(contentsOf: r)
        return out
    }
}
