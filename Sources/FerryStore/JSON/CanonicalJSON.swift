#if canImport(Glibc)
import Glibc
#endif

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

    /// Appends `value` as canonical JSON, for writers that build their JSON directly.
    public static func write(_ value: JSONValue, to out: inout [UInt8]) {
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
        // Sorting the pairs, not the keys, spares a second hash lookup per member.
        for (key, value) in o.sorted(by: { utf8Precedes($0.key, $1.key) }) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            writeString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            write(value, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Whether `a`'s UTF-8 sorts before `b`'s, bytewise — the order of an object's keys (not
    /// Swift's `String <`, which compares Unicode scalars after normalisation and would differ
    /// from other implementations): one `memcmp` on the strings' own buffers (native strings,
    /// every key parsed or built here, need no copy).
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in b.withUTF8 { y in
            let n = min(x.count, y.count)
            if n > 0, let xp = x.baseAddress, let yp = y.baseAddress {
                let c = memcmp(xp, yp, n)
                if c != 0 { return c < 0 }
            }
            return x.count < y.count
        } }
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

    /// Whether any of the eight bytes of `word` is escaped in a string: below 0x20, `"`, `\\` or
    /// DEL. Word-at-a-time tests (a byte below n, a byte equal to c): a borrow can only carry out
    /// of a byte that matched, so the answer for the word is exact. (Swift's `SIMD16` comparisons
    /// compiled to a loop per lane here, slower than the bytewise loop.)
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZero(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & highs }
        let control = (word &- 0x20 &* ones) & ~word & highs
        return control | hasZero(word ^ (0x22 &* ones)) | hasZero(word ^ (0x5C &* ones)) | hasZero(word ^ (0x7F &* ones)) != 0
    }

    /// Appends `s` as a canonical JSON string (quoted, escaped as above), for writers that
    /// build their JSON directly.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { buf in
            // Copy runs that need no escaping in one go; most strings are a single run, found
            // eight bytes at a time.
            var runStart = 0
            var i = 0
            while i < buf.count {
                // A block of eight with nothing to escape is skipped whole; a block with
                // something (and the tail) is gone through byte by byte.
                var end = buf.count
                if buf.count - i >= 8, let raw = buf.baseAddress {
                    guard Self.needsEscape(UnsafeRawPointer(raw + i).loadUnaligned(as: UInt64.self)) else { i += 8; continue }
                    end = i + 8
                }
                while i < end {
                    let c = buf[i]
                    i += 1
                    if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") && c != 0x7F { continue }
                    if i - 1 > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<(i - 1)])) }
                    runStart = i
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
            }
            if buf.count > runStart { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<buf.count])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
