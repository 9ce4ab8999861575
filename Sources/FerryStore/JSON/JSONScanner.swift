/// A validating JSON scanner over raw bytes that allocates nothing.
///
/// Bodies arrive from the wire as bytes and go to disk as bytes; the store only needs to know
/// they are well-formed (RFC 8259: UTF-8, no lone surrogates, no raw control characters in
/// strings, finite numbers, nesting within `maxDepth`) and what the top level is. `JSONParser`
/// reuses the string and number lexing here when a validator or resolver needs values.
public struct JSONScanner {
    /// What the top-level value of a document is.
    public enum TopLevel: Sendable, Equatable { case object, array, string, number, literal }

    let bytes: UnsafeBufferPointer<UInt8>
    var pos = 0
    let maxDepth: Int
    /// Set when the top-level object has a key that starts with `_` or is escaped (and so may
    /// spell one): only such bodies can carry `_attachments` and need parsing on insert.
    var topLevelReservedKey = false
    /// A top-level key whose string value `scan` captures on the way (the type key), or empty.
    var captureKey: [UInt8] = []
    /// The captured value, when the key was present (first occurrence) with a string value.
    var captured: String?
    var captureKeySeen = false

    init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Validates `bytes` as one JSON text and says what its top-level value is.
    /// Throws `.tooLarge` over `sizeLimit` and `.invalidJSON` with the offending offset.
    public static func validate(_ bytes: [UInt8], sizeLimit: Int = .max, maxDepth: Int = 128) throws(StoreError) -> TopLevel {
        try scan(bytes, sizeLimit: sizeLimit, maxDepth: maxDepth).top
    }

    /// What one validating pass over a body found besides validity.
    struct Scan {
        /// The top-level value's kind.
        var top: TopLevel
        /// A top-level key starts with `_` or has escapes (and so may spell any key): only
        /// such bodies can carry `_attachments`, or hide the capture key behind an escape.
        var reservedKey: Bool
        /// The string value of the top-level `captureKey`, if present with a string value.
        var captured: String?
    }

    /// `validate`, in the same single pass also reporting reserved-looking keys and capturing
    /// the string value of one top-level key (the insert path uses both to avoid parsing).
    static func scan(_ bytes: [UInt8], sizeLimit: Int = .max, maxDepth: Int = 128, capture: [UInt8] = []) throws(StoreError) -> Scan {
        guard bytes.count <= sizeLimit else { throw .tooLarge(limit: sizeLimit) }
        return try bytes.withUnsafeBufferPointer { (buf) throws(StoreError) -> Scan in
            var s = JSONScanner(buf, maxDepth: maxDepth)
            s.captureKey = capture
            s.skipSpace()
            let top = try s.scanValue(depth: 0)
            s.skipSpace()
            guard s.pos == s.bytes.count else { throw s.fail("trailing characters") }
            return Scan(top: top, reservedKey: s.topLevelReservedKey, captured: s.captured)
        }
    }

    /// Whether the raw (unescaped) key at `start..<end` is `captureKey`.
    func isCaptureKey(_ start: Int, _ end: Int) -> Bool {
        guard !captureKey.isEmpty, !captureKeySeen, end - start == captureKey.count else { return false }
        for i in 0..<captureKey.count where bytes[start + i] != captureKey[i] { return false }
        return true
    }

    func fail(_ what: String) -> StoreError {
        .invalidJSON(reason: "\(what) at offset \(pos)")
    }

    var atEnd: Bool { pos >= bytes.count }
    var peek: UInt8 { bytes[pos] }

    mutating func skipSpace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    mutating func expect(_ c: UInt8) throws(StoreError) {
        guard pos < bytes.count, bytes[pos] == c else {
            throw fail(atEnd ? "unexpected end" : "expected '\(Character(Unicode.Scalar(c)))'")
        }
        pos += 1
    }

    mutating func scanValue(depth: Int) throws(StoreError) -> TopLevel {
        guard !atEnd else { throw fail("unexpected end") }
        switch peek {
        case UInt8(ascii: "{"):
            try scanObject(depth: depth + 1)
            return .object
        case UInt8(ascii: "["):
            try scanArray(depth: depth + 1)
            return .array
        case UInt8(ascii: "\""):
            _ = try scanString()
            return .string
        case UInt8(ascii: "t"): try literal("true"); return .literal
        case UInt8(ascii: "f"): try literal("false"); return .literal
        case UInt8(ascii: "n"): try literal("null"); return .literal
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = try scanNumber()
            return .number
        default:
            throw fail("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString) throws(StoreError) {
        let n = word.utf8CodeUnitCount
        guard pos + n <= bytes.count else { throw fail("unexpected end") }
        let w = UnsafeBufferPointer(start: word.utf8Start, count: n)
        for i in 0..<n where bytes[pos + i] != w[i] { throw fail("bad literal") }
        pos += n
    }

    mutating func scanObject(depth: Int) throws(StoreError) {
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        pos += 1
        skipSpace()
        if !atEnd && peek == UInt8(ascii: "}") { pos += 1; return }
        while true {
            skipSpace()
            guard !atEnd, peek == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try scanString()
            var capture = false
            if depth == 1 {
                if key.escaped || (key.end > key.start && bytes[key.start] == UInt8(ascii: "_")) {
                    topLevelReservedKey = true
                } else if isCaptureKey(key.start, key.end) {
                    capture = true
                    captureKeySeen = true
                }
            }
            skipSpace()
            try expect(UInt8(ascii: ":"))
            skipSpace()
            if capture && !atEnd && peek == UInt8(ascii: "\"") {
                captured = try JSONParser.string(&self)
            } else {
                _ = try scanValue(depth: depth)
            }
            skipSpace()
            guard !atEnd else { throw fail("unexpected end") }
            if peek == UInt8(ascii: ",") { pos += 1; continue }
            if peek == UInt8(ascii: "}") { pos += 1; return }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func scanArray(depth: Int) throws(StoreError) {
        guard depth <= maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
        pos += 1
        skipSpace()
        if !atEnd && peek == UInt8(ascii: "]") { pos += 1; return }
        while true {
            skipSpace()
            _ = try scanValue(depth: depth)
            skipSpace()
            guard !atEnd else { throw fail("unexpected end") }
            if peek == UInt8(ascii: ",") { pos += 1; continue }
            if peek == UInt8(ascii: "]") { pos += 1; return }
            throw fail("expected ',' or ']'")
        }
    }

    /// Validates a string starting at the opening quote; returns the range of its raw contents
    /// (between the quotes) and whether it contains escapes.
    mutating func scanString() throws(StoreError) -> (start: Int, end: Int, escaped: Bool) {
        pos += 1
        let start = pos
        var escaped = false
        while pos < bytes.count {
            skipPlainRun()
            guard pos < bytes.count else { break }
            let c = bytes[pos]
            if c == UInt8(ascii: "\"") {
                let end = pos
                pos += 1
                return (start, end, escaped)
            } else if c == UInt8(ascii: "\\") {
                escaped = true
                try scanEscape()
            } else if c < 0x20 {
                throw fail("raw control character in string")
            } else if c < 0x80 {
                pos += 1
            } else {
                try scanUTF8()
            }
        }
        throw fail("unterminated string")
    }

    /// Skips 8 bytes at a time while none is `"`, `\`, a control character or non-ASCII
    /// (SWAR: each test sets a byte's high bit exactly when that byte matches).
    mutating func skipPlainRun() {
        guard let base = bytes.baseAddress else { return }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while pos + 8 <= bytes.count {
            let w = UnsafeRawPointer(base + pos).loadUnaligned(as: UInt64.self)
            let q = w ^ (ones &* 0x22), b = w ^ (ones &* 0x5C)
            let special = ((q &- ones) & ~q) | ((b &- ones) & ~b) | ((w &- ones &* 0x20) & ~w) | w
            if special & highs != 0 { return }
            pos += 8
        }
    }

    mutating func scanEscape() throws(StoreError) {
        pos += 1
        guard !atEnd else { throw fail("unterminated escape") }
        switch peek {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            pos += 1
        case UInt8(ascii: "u"):
            pos += 1
            let u = try hex4()
            if (0xD800...0xDBFF).contains(u) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u") else {
                    throw fail("lone surrogate")
                }
                pos += 2
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate") }
            } else if (0xDC00...0xDFFF).contains(u) {
                throw fail("lone surrogate")
            }
        default:
            throw fail("bad escape")
        }
    }

    mutating func hex4() throws(StoreError) -> UInt32 {
        guard pos + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[pos]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit")
            }
            v = v << 4 | d
            pos += 1
        }
        return v
    }

    /// One multi-byte UTF-8 sequence: no overlongs, no surrogates, nothing above U+10FFFF.
    mutating func scanUTF8() throws(StoreError) {
        let c = bytes[pos]
        let need: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        switch c {
        case 0xC2...0xDF: need = 1
        case 0xE0: need = 2; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 2
        case 0xED: need = 2; hi = 0x9F
        case 0xF0: need = 3; lo = 0x90
        case 0xF1...0xF3: need = 3
        case 0xF4: need = 3; hi = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard pos + need < bytes.count else { throw fail("truncated UTF-8") }
        let b1 = bytes[pos + 1]
        guard b1 >= lo && b1 <= hi else { throw fail("invalid UTF-8") }
        for i in 2...max(2, need) where i <= need {
            guard bytes[pos + i] & 0xC0 == 0x80 else { throw fail("invalid UTF-8") }
        }
        pos += need + 1
    }

    /// Validates a number; returns its range and whether it is an integer literal.
    mutating func scanNumber() throws(StoreError) -> (start: Int, end: Int, integer: Bool) {
        let start = pos
        var integer = true
        if peek == UInt8(ascii: "-") { pos += 1 }
        guard !atEnd else { throw fail("bad number") }
        if peek == UInt8(ascii: "0") {
            pos += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(peek) {
            while !atEnd && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(peek) { pos += 1 }
        } else {
            throw fail("bad number")
        }
        if !atEnd && peek == UInt8(ascii: ".") {
            integer = false
            pos += 1
            guard !atEnd, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(peek) else { throw fail("bad fraction") }
            while !atEnd && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(peek) { pos += 1 }
        }
        var exponent = false
        if !atEnd && (peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E")) {
            integer = false
            exponent = true
            pos += 1
            if !atEnd && (peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-")) { pos += 1 }
            guard !atEnd, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(peek) else { throw fail("bad exponent") }
            while !atEnd && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(peek) { pos += 1 }
        }
        // Without an exponent, fewer than 300 characters are below 1e300 and cannot overflow:
        // only other numbers need the (allocating) conversion.
        if !integer && (exponent || pos - start >= 300) {
            // Reject values that overflow a double (1e400): they have no canonical form.
            let d = Self.parseDouble(bytes, start, pos)
            guard let d, d.isFinite else { throw fail("number out of range") }
        }
        return (start, pos, integer)
    }

    static func parseDouble(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Double? {
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        return Double(text)
    }
}
