/// DNS-SD's key/value pairs in TXT record strings (RFC 6763 §6; Protocol/dns-sd.md, "TXT"):
/// `key=value`, or `key` alone for a boolean attribute.
public enum DNSTXT {
    /// The strings for `pairs`, in order: `key=value`, or `key` when the value is nil. A pair
    /// is left out when its string would exceed 255 bytes (RFC 6763 §6.1) or its key breaks
    /// RFC 6763 §6.4 (empty, or not printable US-ASCII `0x20`–`0x7E` without `=`), because a
    /// reader would drop or misread it. Never empty: with no pairs left, one empty string
    /// (RFC 6763 §6.1), which is what a TXT record without pairs decodes to.
    public static func encode(_ pairs: [(key: String, value: String?)]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for (key, value) in pairs {
            var s = Array(key.utf8)
            guard !s.isEmpty, s.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "=") }) else { continue }
            if let value {
                s.append(UInt8(ascii: "="))
                s += value.utf8
            }
            guard s.count <= 255 else { continue }
            out.append(s)
        }
        return out.isEmpty ? [[]] : out
    }

    /// The pairs in `strings`, keyed by lowercased key (keys are case-insensitive, RFC 6763
    /// §6.4). The first occurrence of a key wins and later ones are ignored (§6.4); a string
    /// starting with `=` has no key and is ignored, as are empty strings. A key alone gives a
    /// nil value; `key=` gives an empty one (§6.4 tells them apart). Values are opaque bytes to
    /// DNS-SD (§6.5); here they are read as UTF-8, any invalid sequence becoming U+FFFD.
    public static func decode(_ strings: [[UInt8]]) -> [String: String?] {
        var out: [String: String?] = [:]
        for s in strings where s.first != nil && s.first != UInt8(ascii: "=") {
            let equals = s.firstIndex(of: UInt8(ascii: "="))
            let key = String(decoding: s[..<(equals ?? s.endIndex)].map(DNSName.lower), as: UTF8.self)
            guard out.index(forKey: key) == nil else { continue }
            let value = equals.map { String(decoding: s[($0 + 1)...], as: UTF8.self) }
            // updateValue, not a subscript assignment: assigning nil would remove the key.
            out.updateValue(value, forKey: key)
        }
        return out
    }
}
