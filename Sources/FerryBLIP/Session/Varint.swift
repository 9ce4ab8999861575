/// Unsigned LEB128 varints as BLIP uses them: 7 bits per byte, least significant first.
public enum Varint {
    /// Appends `value`'s encoding to `out`.
    public static func write(_ value: UInt64, into out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// The number of bytes `value`'s encoding takes.
    public static func length(_ value: UInt64) -> Int {
        var v = value, n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }

    /// The encoding of `value`.
    public static func encode(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    /// Reads a varint at `offset`. Returns the value and the bytes it took, nil when the bytes
    /// end inside it. Throws for more than 10 bytes (over 64 bits).
    public static func read(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(BLIPError) -> (UInt64, Int)? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while i < bytes.count {
            let b = bytes[i]
            if shift == 63 && b > 1 { throw .protocolError("varint overflows 64 bits") }
            value |= UInt64(b & 0x7F) << shift
            i += 1
            if b & 0x80 == 0 { return (value, i - offset) }
            shift += 7
            if shift > 63 { throw .protocolError("varint longer than 10 bytes") }
        }
        return nil
    }
}
