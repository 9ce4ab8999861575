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

    /// The sixteen lowercase digits, for code that writes hex in place (JSON escapes, inline
    /// revision digests).
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)
}
