/// Parses JSON bytes into `JSONValue`s, with the same validation as `JSONScanner` plus a
/// refusal of duplicate object keys (they would make the canonical form ambiguous).
public enum JSONParser {
    /// Parses one JSON text. Throws `.tooLarge` over `sizeLimit`, `.invalidJSON` otherwise.
    public static func parse(_ bytes: [UInt8], sizeLimit: Int = .max, maxDepth: Int = 128) throws(StoreError) -> JSONValue {
        guard bytes.count <= sizeLimit else { throw .tooLarge(limit: sizeLimit) }
        return try bytes.withUnsafeBufferPointer { (buf) throws(StoreError) -> JSONValue in
            var s = JSONScanner(buf, maxDepth: maxDepth)
            s.skipSpace()
            let v = try value(&s, depth: 0)
            s.skipSpace()
            guard s.atEnd else { throw s.fail("trailing characters") }
            return v
        }
    }

    /// Parses a document body: must be an object.
    public static func parseObject(_ bytes: [UInt8], sizeLimit: Int = .max) throws(StoreError) -> [String: JSONValue] {
        guard case .object(let o) = try parse(bytes, sizeLimit: sizeLimit) else { throw .notAnObject }
        return o
    }

    /// The members named `names` (UTF-8, unescaped, no two alike) of a stored document body,
    /// the others skipped, not built; the scan stops once every name was found, so what an
    /// index needs of a body costs the bytes up to its last column. For bodies the store
    /// validated already (the rest is not looked at); throws as `parseObject` does.
    static func parseMembers(_ bytes: [UInt8], named names: [[UInt8]]) throws(StoreError) -> [String: JSONValue] {
        if names.isEmpty { return [:] }
        return try bytes.withUnsafeBufferPointer { (buf) throws(StoreError) -> [String: JSONValue] in
            var s = JSONScanner(buf, maxDepth: 128)
            s.skipSpace()
            guard !s.atEnd, s.peek == UInt8(ascii: "{") else { throw .notAnObject }
            s.pos += 1
            var out: [String: JSONValue] = [:]
            s.skipSpace()
            if !s.atEnd && s.peek == UInt8(ascii: "}") { return out }
            while true {
                s.skipSpace()
                guard !s.atEnd, s.peek == UInt8(ascii: "\"") else { throw s.fail("expected a string key") }
                let keyAt = s.pos
                let raw = try s.scanString()
                var wanted: String?
                if raw.escaped {
                    s.pos = keyAt
                    let key = try string(&s)
                    if names.contains(Array(key.utf8)) { wanted = key }
                } else {
                    let n = raw.end - raw.start
                    let bytes = UnsafeBufferPointer(rebasing: buf[raw.start..<raw.end])
                    if names.contains(where: { $0.count == n && $0.elementsEqual(bytes) }) {
                        wanted = String(decoding: bytes, as: UTF8.self)
                    }
                }
                s.skipSpace()
                try s.expect(UInt8(ascii: ":"))
                s.skipSpace()
                if let wanted {
                    out[wanted] = try value(&s, depth: 1)
                    if out.count == names.count { return out }
                } else {
                    _ = try s.scanValue(depth: 1)
                }
                s.skipSpace()
                guard !s.atEnd else { throw s.fail("unexpected end") }
                if s.peek == UInt8(ascii: ",") { s.pos += 1; continue }
                if s.peek == UInt8(ascii: "}") { return out }
                throw s.fail("expected ',' or '}'")
            }
        }
    }

    static func value(_ s: inout JSONScanner, depth: Int) throws(StoreError) -> JSONValue {
        guard !s.atEnd else { throw s.fail("unexpected end") }
        switch s.peek {
        case UInt8(ascii: "{"):
            guard depth + 1 <= s.maxDepth else { throw s.fail("nesting deeper than \(s.maxDepth)") }
            s.pos += 1
            var out: [String: JSONValue] = [:]
            s.skipSpace()
            if !s.atEnd && s.peek == UInt8(ascii: "}") { s.pos += 1; return .object(out) }
            while true {
                s.skipSpace()
                guard !s.atEnd, s.peek == UInt8(ascii: "\"") else { throw s.fail("expected a string key") }
                let keyAt = s.pos
                let key = try string(&s)
                s.skipSpace()
                try s.expect(UInt8(ascii: ":"))
                s.skipSpace()
                let v = try value(&s, depth: depth + 1)
                if out.updateValue(v, forKey: key) != nil {
                    s.pos = keyAt
                    throw s.fail("duplicate key \(key.debugDescription)")
                }
                s.skipSpace()
                guard !s.atEnd else { throw s.fail("unexpected end") }
                if s.peek == UInt8(ascii: ",") { s.pos += 1; continue }
                if s.peek == UInt8(ascii: "}") { s.pos += 1; return .object(out) }
                throw s.fail("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            guard depth + 1 <= s.maxDepth else { throw s.fail("nesting deeper than \(s.maxDepth)") }
            s.pos += 1
            var out: [JSONValue] = []
            s.skipSpace()
            if !s.atEnd && s.peek == UInt8(ascii: "]") { s.pos += 1; return .array(out) }
            while true {
                s.skipSpace()
                out.append(try value(&s, depth: depth + 1))
                s.skipSpace()
                guard !s.atEnd else { throw s.fail("unexpected end") }
                if s.peek == UInt8(ascii: ",") { s.pos += 1; continue }
                if s.peek == UInt8(ascii: "]") { s.pos += 1; return .array(out) }
                throw s.fail("expected ',' or ']'")
            }
        case UInt8(ascii: "\""):
            return .string(try string(&s))
        case UInt8(ascii: "t"): try s.literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try s.literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try s.literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let (start, end, integer) = try s.scanNumber()
            if integer, let i = parseInt(s.bytes, start, end) { return .int(i) }
            guard let d = JSONScanner.parseDouble(s.bytes, start, end), d.isFinite else { throw s.fail("number out of range") }
            // Integral doubles in the exactly-representable range are integers, so that `1.0`
            // and `1` are the same value (and the same canonical text).
            if d == d.rounded(), abs(d) < 9_007_199_254_740_992, let i = Int64(exactly: d) { return .int(i) }
            return .double(d)
        default:
            throw s.fail("unexpected character")
        }
    }

    static func parseInt(_ b: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int64? {
        var i = start
        let negative = b[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var v: Int64 = 0
        while i < end {
            let d = Int64(b[i] - UInt8(ascii: "0"))
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (r, o2) = negative ? m.subtractingReportingOverflow(d) : m.addingReportingOverflow(d)
            if o1 || o2 { return nil }
            v = r
            i += 1
        }
        return v
    }

    /// Validates and decodes a string at the scanner's position.
    static func string(_ s: inout JSONScanner) throws(StoreError) -> String {
        let (start, end, escaped) = try s.scanString()
        let raw = UnsafeBufferPointer(rebasing: s.bytes[start..<end])
        if !escaped { return String(decoding: raw, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = 0
        // The scanner has validated every escape, so decoding cannot fail here.
        while i < raw.count {
            let c = raw[i]
            guard c == UInt8(ascii: "\\") else { out.append(c); i += 1; continue }
            let e = raw[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var u = hex(raw, i)
                i += 4
                if (0xD800...0xDBFF).contains(u) {
                    let low = hex(raw, i + 2)
                    i += 6
                    u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                }
                appendUTF8(u, to: &out)
            default: out.append(e)   // \" \\ \/
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hex(_ raw: UnsafeBufferPointer<UInt8>, _ at: Int) -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 {
            let c = raw[at + k] | 0x20
            v = v << 4 | UInt32(c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10)
        }
        return v
    }

    static func appendUTF8(_ u: UInt32, to out: inout [UInt8]) {
        switch u {
        case 0..<0x80: out.append(UInt8(u))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | (u >> 6))); out.append(UInt8(0x80 | (u & 0x3F)))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | (u >> 12))); out.append(UInt8(0x80 | ((u >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (u & 0x3F)))
        default:
            out.append(UInt8(0xF0 | (u >> 18))); out.append(UInt8(0x80 | ((u >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((u >> 6) & 0x3F))); out.append(UInt8(0x80 | (u & 0x3F)))
        }
    }
}
