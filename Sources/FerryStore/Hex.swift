/// Bytes as lowercase hexadecimal text: digests in file and index names, revision IDs, tokens,
/// password hashes (the daemon and the CouchDB client use it too).
public enum Hex {
    /// Two lowercase hex digits per byte.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes a run of hex digits stands for (two per byte); nil for an odd count or any
    /// other character. Only lowercase digits by default, the form `encode` writes, so text
    /// that names something (a blob's file) has one spelling; `allowingUppercase` for text a
    /// person may have typed.
    public static func decode(_ text: some StringProtocol, allowingUppercase: Bool = false) -> [UInt8]? {
        let utf8 = text.utf8
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F") where allowingUppercase: c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var it = utf8.makeIterator()
        while let hi = it.next(), let lo = it.next() {
            guard let h = nibble(hi), let l = nibble(lo) else { return nil }
            out.append(h << 4 | l)
        }
        return out
    }

    /// The sixteen lowercase digits, for code that writes hex in place (JSON escapes, inline
    /// revision digests).
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    // MARK: Eight digits at a time

    /// `0x01` in every byte of a word.
    private static let ones: UInt64 = 0x0101_0101_0101_0101

    /// The value of the eight lowercase hex digits at `p` (the first the most significant), or
    /// nil if any is not one. All eight are checked and converted together in one 64-bit word:
    /// revision IDs hold 40 digits and are parsed several times per replicated document, where
    /// a loop per digit showed in profiles.
    @inline(__always)
    static func value8(at p: UnsafeRawPointer) -> UInt32? {
        let v = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
        let top = ones &* 0x80
        // With every byte under 0x80, adding under 0x80 to each carries into no other byte: the
        // sum's top bit then says whether the byte is at least the bound.
        guard v & top == 0 else { return nil }
        func atLeast(_ bound: UInt64) -> UInt64 { v &+ ones &* (0x80 - bound) }
        let digit = atLeast(0x30) & ~atLeast(0x3A)                 // "0"…"9"
        let letter = atLeast(0x61) & ~atLeast(0x67)                // "a"…"f"
        guard (digit | letter) & top == top else { return nil }
        // A digit's value is its low four bits, plus 9 for a letter (bit 6 set).
        let nibbles = (v & (ones &* 0x0F)) &+ ((v >> 6) & ones) &* 9
        // Byte i holds digit i; pack pairs into bytes, bytes into halves, halves into the word.
        let bytes = ((nibbles & 0x000F_000F_000F_000F) << 4) | ((nibbles >> 8) & 0x000F_000F_000F_000F)
        let halves = ((bytes & 0x0000_00FF_0000_00FF) << 8) | ((bytes >> 16) & 0x0000_00FF_0000_00FF)
        return UInt32(truncatingIfNeeded: ((halves & 0xFFFF) << 16) | ((halves >> 32) & 0xFFFF))
    }

    /// Writes `value` as eight lowercase hex digits at `p`, the most significant first, in one
    /// store (the inverse of `value8(at:)`).
    @inline(__always)
    static func write8(_ value: UInt32, to p: UnsafeMutableRawPointer) {
        // Spread the digits so byte i holds digit i: halves, then bytes, then nibbles.
        var x = UInt64(value >> 16) | (UInt64(value & 0xFFFF) << 32)
        x = ((x >> 8) & 0x0000_00FF_0000_00FF) | ((x & 0x0000_00FF_0000_00FF) << 16)
        x = ((x >> 4) & 0x000F_000F_000F_000F) | ((x & 0x000F_000F_000F_000F) << 8)
        // "0" + n, and 39 more for n ≥ 10 (the gap to "a"): n + 0x76 has its top bit set then.
        let letters = ((x &+ ones &* 0x76) >> 7) & ones
        let text = x &+ ones &* 0x30 &+ letters &* 39
        p.storeBytes(of: text.littleEndian, as: UInt64.self)
    }
}
