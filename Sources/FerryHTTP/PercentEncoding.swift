/// Percent-encoding of URL components (RFC 3986 §2.1): decoding to UTF-8, and encoding that
/// keeps the unreserved characters (and any others the caller names) and escapes every other
/// byte of the UTF-8 form. The one place Ferry does either: REST paths and queries, the
/// credentials in a URL's user-info, and the paths the clients send.
public enum PercentEncoding {
    /// The decoded text; nil for a broken escape or bytes that are not UTF-8. `plusIsSpace`
    /// reads `+` as a space, as form-encoded query strings write it.
    public static func decode<S: StringProtocol>(_ s: S, plusIsSpace: Bool = false) -> String? {
        if !s.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) { return String(s) }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var it = s.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next().flatMap(hexValue), let l = it.next().flatMap(hexValue) else { return nil }
                out.append(h << 4 | l)
            } else if plusIsSpace && b == UInt8(ascii: "+") {
                out.append(0x20)
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// `s` with every byte escaped but ASCII letters, digits, the unreserved `-._~` and the
    /// ASCII characters in `keeping`.
    public static func encode(_ s: String, keeping: String = "") -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case 48...57, 65...90, 97...122, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            case _ where b < 0x80 && keeping.utf8.contains(b):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(b >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hexDigits[Int(b & 0xF)]))
            }
        }
        return out
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 48...57: return b - 48
        case 65...70: return b - 55
        case 97...102: return b - 87
        default: return nil
        }
    }
}
