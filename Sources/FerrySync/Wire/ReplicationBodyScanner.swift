import FerryStore

/// Reads a `changes` or `proposeChanges` body in the shape peers send — an array of short
/// arrays of plain strings and non-negative integers — without building a `JSONValue` tree
/// for the whole body (Protocol/replication.md, "changes", "proposeChanges").
///
/// It is only a shortcut: anything outside that shape (an escape or a non-ASCII byte in a
/// string, a fraction, a sign, an object, a syntax error) makes it give up, and the caller parses
/// the body with the general JSON parser instead. So what is accepted, and the error for what
/// is not, never depend on which reader ran; `ReplicationMessageTests` checks the two agree.
struct ReplicationBodyScanner {
    /// The longest integer read (more digits could overflow `Int64`; the general parser decides).
    static let maxDigits = 18

    /// The entries' values, all in one array, and where each entry ends in it; nil if the body
    /// is not in the shape this reader takes. The whole body is read before any entry is
    /// looked at, so a malformed body is a JSON error whichever reader runs.
    static func entries(in body: [UInt8]) -> (values: [JSONValue], ends: [Int])? {
        body.withUnsafeBufferPointer { buffer -> ([JSONValue], [Int])? in
            var scanner = ReplicationBodyScanner(bytes: buffer)
            var values: [JSONValue] = [], ends: [Int] = []
            scanner.skipSpace()
            guard scanner.take(UInt8(ascii: "[")) else { return nil }
            scanner.skipSpace()
            if scanner.take(UInt8(ascii: "]")) { return scanner.atEndAfterSpace() ? (values, ends) : nil }
            // Entries are a few dozen bytes each: room for all of them at once.
            values.reserveCapacity(buffer.count / 12)
            ends.reserveCapacity(buffer.count / 40)
            repeat {
                scanner.skipSpace()
                guard scanner.take(UInt8(ascii: "[")) else { return nil }
                scanner.skipSpace()
                if !scanner.take(UInt8(ascii: "]")) {
                    repeat {
                        scanner.skipSpace()
                        guard let v = scanner.value() else { return nil }
                        values.append(v)
                        scanner.skipSpace()
                    } while scanner.take(UInt8(ascii: ","))
                    guard scanner.take(UInt8(ascii: "]")) else { return nil }
                }
                ends.append(values.count)
                scanner.skipSpace()
            } while scanner.take(UInt8(ascii: ","))
            guard scanner.take(UInt8(ascii: "]")), scanner.atEndAfterSpace() else { return nil }
            return (values, ends)
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func atEndAfterSpace() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    /// A plain string, a non-negative integer, `true`, `false` or `null`; nil for anything else.
    private mutating func value() -> JSONValue? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return integer().map { .int($0) }
        case UInt8(ascii: "t"): return word("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return word("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return word("null") ? .null : nil
        default: return nil
        }
    }

    /// A string of printable ASCII without escapes (what IDs and revision IDs are in practice).
    private mutating func string() -> String? {
        let start = index + 1
        var i = start
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                index = i + 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            }
            guard c >= 0x20, c < 0x7F, c != UInt8(ascii: "\\") else { return nil }
            i += 1
        }
        return nil
    }

    /// Digits without a leading zero (unless alone), and no fraction or exponent after them.
    private mutating func integer() -> Int64? {
        let start = index
        var n: Int64 = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            // Checked before the digit is added: 18 digits always fit in an Int64, 19 may not.
            guard index - start < Self.maxDigits else { return nil }
            n = n * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
            index += 1
        }
        if index - start > 1 && bytes[start] == UInt8(ascii: "0") { return nil }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return n
    }

    private mutating func word(_ w: StaticString) -> Bool {
        let n = w.utf8CodeUnitCount
        guard bytes.count - index >= n else { return false }
        for k in 0..<n where bytes[index + k] != w.utf8Start[k] { return false }
        index += n
        return true
    }
}
