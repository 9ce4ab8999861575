/// JSON values as bytes that compare (`memcmp`, SQLite's BLOB order) as `CouchCollation`
/// compares the values, so a SQLite index over them is a CouchDB view's order. Each value's
/// encoding is prefix-free — no value's bytes begin another's — so a row's key can be the
/// concatenation of its columns' encodings followed by the document ID's UTF-8 bytes, which
/// sorts by the columns, then by the ID byte by byte, as CouchDB's views do.
///
/// A type tag first (`null < false < true < numbers < strings < arrays < objects`), then:
/// numbers as the IEEE-754 double in an order-preserving big-endian form (integers beyond 2^53
/// that share a double tie; Protocol/rest.md lists it); strings as their ICU sort key;
/// arrays and objects as their elements (an object's members sorted by name, each name's sort
/// key after a marker byte, then its value) closed by a zero byte, below every tag so a prefix sorts first.
public enum CollationKey {
    static let end: UInt8 = 0x00
    static let null: UInt8 = 0x10
    static let `false`: UInt8 = 0x20
    static let `true`: UInt8 = 0x21
    static let number: UInt8 = 0x30
    static let string: UInt8 = 0x40
    static let array: UInt8 = 0x50
    static let object: UInt8 = 0x60
    static let member: UInt8 = 0x01
    /// Above every byte a key holds after a complete value (tags, zero, UTF-8 bytes): a bound
    /// that follows every key starting with the bytes before it.
    static let after: UInt8 = 0xFF

    /// The bytes of `values` in order.
    public static func encode(_ values: [JSONValue]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 * values.count)
        for v in values { append(v, to: &out) }
        return out
    }

    /// Appends one value's bytes.
    static func append(_ v: JSONValue, to out: inout [UInt8]) {
        switch v {
        case .null: out.append(null)
        case .bool(let b): out.append(b ? `true` : `false`)
        case .int(let i): appendNumber(Double(i), to: &out)
        case .double(let d): appendNumber(d, to: &out)
        case .string(let s):
            out.append(string)
            CouchCollation.appendSortKey(s, to: &out)
        case .array(let items):
            out.append(array)
            for item in items { append(item, to: &out) }
            out.append(end)
        case .object(let members):
            out.append(object)
            let keyed = members.map { (key: CouchCollation.sortKey($0.key), value: $0.value) }
                .sorted { $0.key.lexicographicallyPrecedes($1.key) }
            for m in keyed {
                // Above `end`, whatever the name's key begins with.
                out.append(member)
                out += m.key
                append(m.value, to: &out)
            }
            out.append(end)
        }
    }

    private static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        out.append(number)
        // -0.0 collates equal to 0.0; negative numbers flip every bit, positive only the sign,
        // so unsigned byte order is numeric order.
        let bits = (d == 0 ? 0.0 : d).bitPattern
        let ordered = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: ordered >> UInt64(shift))) }
    }
}
