/// Ferry's canonical JSON writer, the input of the revision digest (Protocol/revisions.md,
/// "Revision IDs").
///
/// Promises: object keys sorted bytewise by their UTF-8; no whitespace; strings written as raw
/// UTF-8 with only `"` and `\` escaped as `\"` `\\`, `\n` `\r` `\t` as those escapes, and every
/// other control character and DEL as `\u00xx` (lowercase hex); integers in decimal; other
/// numbers as Swift's shortest round-trip decimal (`1.5`, `1e-07`, `1e+100`), with integral
/// values below 2^53 written as integers. The same value always gives the same bytes.
public enum CanonicalJSON {
    /// The canonical bytes of `value`.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return out
    }

    /// The canonical bytes of a document body.
    public static func encode(_ object: [String: JSONValue]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        writeObject(object, to: &out)
        return out
    }

    static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(true): out.append(contentsOf: [0x74, 0x72, 0x75, 0x65])
        case .bool(false): out.append(contentsOf: [0x66, 0x61, 0x6C, 0x73, 0x65])
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): writeDouble(d, to: &out)
        case .string(let s): writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(v, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o): writeObject(o, to: &out)
        }
    }

    static func writeObject(_ o: [String: JSONValue], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for key in sortedKeys(o) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            writeString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            // The key came from the dictionary, so the lookup cannot miss.
            write(o[key] ?? .null, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Keys in bytewise UTF-8 order (not Swift's `String <`, which compares Unicode scalars
    /// after normalisation and would differ from other implementations).
    static func sortedKeys(_ o: [String: JSONValue]) -> [String] {
        o.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    static func writeDouble(_ d: Double, to out: inout [UInt8]) {
        if d.isFinite, d == d.rounded(), abs(d) < 9_007_199_254_740_992, let i = Int64(exactly: d) {
            out.append(contentsOf: String(i).utf8)
        } else if d.isFinite {
            out.append(contentsOf: d.description.utf8)
        } else {
            // Not representable in JSON; values built in code are the only way here.
            out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        }
    }

    /// Appends `s` as a canonical JSON string (quoted, escaped as above), for writers that
    /// build their JSON directly.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { buf in
            // Copy runs that need no escaping in one go; most strings are a single run.
            var runStart = 0
            for i in 0..<buf.count {
                let c = buf[i]
                if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") && c != 0x7F { continue }
                if i > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<i])) }
                runStart = i + 1
                switch c {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(c)
                case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                            Hex.digits[Int(c >> 4)], Hex.digits[Int(c & 0xF)]])
                }
            }
            if buf.count > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<buf.count])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
