import _FoundationICU
import Synchronization

/// CouchDB's order of JSON values (its view collation, `couch_ejson_compare`), which Mango's
/// comparisons and sorts use: `null < false < true < numbers < strings < arrays < objects`;
/// numbers by value (an integer equals the same float); strings by the Unicode Collation
/// Algorithm's root order (ICU's root collator with its defaults, as CouchDB opens it:
/// `"a" < "A" < "b"`, punctuation before letters); arrays element by element, a prefix first;
/// objects member by member (name, then value), fewer members first.
///
/// Objects: CouchDB compares members in the order they were written; Ferry's JSON objects
/// keep no order, so members are compared in collation order of their names (Protocol/rest.md,
/// "Deliberate differences from CouchDB").
public enum CouchCollation {
    /// Negative, zero or positive as `a` sorts before, with or after `b`.
    public static func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
        let ra = rank(a), rb = rank(b)
        guard ra == rb else { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case (.bool(let x), .bool(let y)): return x == y ? 0 : (x ? 1 : -1)
        case (.string(let x), .string(let y)): return compareStrings(x, y)
        case (.array(let x), .array(let y)):
            return compareElements(x, y, by: compare)
        case (.object(let x), .object(let y)):
            let kx = x.keys.sorted { compareStrings($0, $1) < 0 }, ky = y.keys.sorted { compareStrings($0, $1) < 0 }
            for (p, q) in zip(kx, ky) {
                let c = compareStrings(p, q)
                if c != 0 { return c }
                let v = compare(x[p] ?? .null, y[q] ?? .null)
                if v != 0 { return v }
            }
            return kx.count == ky.count ? 0 : (kx.count < ky.count ? -1 : 1)
        default:
            return compareNumbers(a, b)
        }
    }

    /// Two arrays element by element under `cmp`, a prefix first (both orders compare arrays so).
    static func compareElements(_ x: [JSONValue], _ y: [JSONValue], by cmp: (JSONValue, JSONValue) -> Int) -> Int {
        for (p, q) in zip(x, y) {
            let c = cmp(p, q)
            if c != 0 { return c }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }

    /// The type's place in the order.
    static func rank(_ v: JSONValue) -> Int {
        switch v {
        case .null: 0
        case .bool: 1
        case .int, .double: 2
        case .string: 3
        case .array: 4
        case .object: 5
        }
    }

    /// Numbers by value: integers exactly, an integer against a float as Erlang compares them.
    static func compareNumbers(_ a: JSONValue, _ b: JSONValue) -> Int {
        switch (a, b) {
        case (.int(let x), .int(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.double(let x), .double(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.int(let x), .double(let y)): return -compareDoubleToInt(y, x)
        case (.double(let x), .int(let y)): return compareDoubleToInt(x, y)
        default: return 0
        }
    }

    private static func compareDoubleToInt(_ d: Double, _ i: Int64) -> Int {
        // Exact: the Double's integral part is converted only within Int64's range (2^63 is
        // exactly representable; every Int64 lies in [-2^63, 2^63)).
        if d.isNaN { return 0 }
        if d >= 9_223_372_036_854_775_808.0 { return 1 }
        if d < -9_223_372_036_854_775_808.0 { return -1 }
        let t = d.rounded(.down)
        let ti = Int64(t)
        if ti != i { return ti < i ? -1 : 1 }
        return d > t ? 1 : 0
    }

    /// Two strings in the root collation order (ICU, CouchDB's `ucol_open("")`).
    public static func compareStrings(_ a: String, _ b: String) -> Int {
        if a == b { return 0 }
        return collators.compare(a, b)
    }

    /// The string's ICU sort key: its bytes compare (`memcmp`) as `compareStrings` compares
    /// the strings. It ends with its only zero byte, so no key is a prefix of another.
    static func sortKey(_ s: String) -> [UInt8] {
        collators.sortKey(s)
    }

    /// Appends `sortKey(s)` to `out`.
    static func appendSortKey(_ s: String, to out: inout [UInt8]) {
        collators.appendSortKey(s, to: &out)
    }

    private static let collators = CollatorPool()
}

/// ICU collators, one per concurrent comparison: a `UCollator` may not be shared between
/// threads (ICU's rule), so each comparison takes one from the pool and puts it back.
private final class CollatorPool: Sendable {
    // The pointers are owned by the pool; each is used by one thread at a time (taken out
    // under the lock, returned after the comparison).
    private let idle = Mutex<[UncheckedCollator]>([])

    struct UncheckedCollator: @unchecked Sendable {
        // @unchecked: a UCollator is used by one thread at a time (see CollatorPool).
        let pointer: OpaquePointer
    }

    func compare(_ a: String, _ b: String) -> Int {
        guard let collator = take() else { return a < b ? -1 : (a == b ? 0 : 1) }
        defer { idle.withLock { $0.append(collator) } }
        var a = a, b = b
        var status = U_ZERO_ERROR
        let result = a.withUTF8 { pa in
            b.withUTF8 { pb in
                pa.withMemoryRebound(to: CChar.self) { ca in
                    pb.withMemoryRebound(to: CChar.self) { cb in
                        swift_ucol_strcollUTF8(collator.pointer, ca.baseAddress, Int32(ca.count), cb.baseAddress, Int32(cb.count), &status)
                    }
                }
            }
        }
        guard status.rawValue <= U_ZERO_ERROR.rawValue else { return a < b ? -1 : (a == b ? 0 : 1) }
        return Int(result.rawValue)
    }

    func sortKey(_ s: String) -> [UInt8] {
        var key: [UInt8] = []
        appendSortKey(s, to: &key)
        return key
    }

    /// Appends the sort key in place: the UTF-16 ICU reads is on the stack and ICU writes
    /// into `out`'s own storage, since this runs for every indexed string a write stores.
    func appendSortKey(_ s: String, to out: inout [UInt8]) {
        let start = out.count
        func fallback(_ out: inout [UInt8]) {
            out.removeSubrange(start...)
            out += s.utf8
            out.append(0)
        }
        guard let collator = take() else { fallback(&out); return }
        defer { idle.withLock { $0.append(collator) } }
        let count = s.utf16.count
        withUnsafeTemporaryAllocation(of: UInt16.self, capacity: max(1, count)) { units in
            _ = units.initialize(fromContentsOf: s.utf16)
            var capacity = count * 4 + 16
            for _ in 0..<2 {
                out.append(contentsOf: repeatElement(0, count: capacity))
                let n = out.withUnsafeMutableBufferPointer { k in
                    swift_ucol_getSortKey(collator.pointer, units.baseAddress, Int32(count), k.baseAddress.map { $0 + start },
                                          Int32(capacity))
                }
                if n > 0, Int(n) <= capacity {
                    out.removeSubrange((start + Int(n))...)
                    return
                }
                out.removeSubrange(start...)
                // Too small a buffer: ICU said how long the key is.
                guard Int(n) > capacity else { break }
                capacity = Int(n)
            }
            fallback(&out)
        }
    }

    private func take() -> UncheckedCollator? {
        if let c = idle.withLock({ $0.popLast() }) { return c }
        var status = U_ZERO_ERROR
        guard let c = swift_ucol_open("", &status), status.rawValue <= U_ZERO_ERROR.rawValue else { return nil }
        return UncheckedCollator(pointer: c)
    }
}
