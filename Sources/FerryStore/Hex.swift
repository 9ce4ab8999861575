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
}
