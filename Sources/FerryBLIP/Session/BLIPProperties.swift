import FerryWebSocket

/// The properties of a BLIP message: ordered string pairs, encoded as
/// `key NUL value NUL …` behind a varint of their length (Protocol/blip.md, "Message encoding").
public struct BLIPProperties: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral {
    /// The pairs in order.
    public private(set) var pairs: [(key: String, value: String)]

    /// Empty properties.
    public init() { pairs = [] }
    /// Properties from pairs, in this order.
    public init(_ pairs: [(String, String)]) { self.pairs = pairs.map { (key: $0.0, value: $0.1) } }
    /// Properties from labeled pairs, in this order, taken as they are (the keys must differ).
    public init(pairs: [(key: String, value: String)]) { self.pairs = pairs }
    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }
    /// Properties from an array literal of pairs, kept in order.
    public init(arrayLiteral elements: (String, String)...) { self.init(elements) }

    /// The first value for `key` (duplicates are refused on decode, so there is one).
    public subscript(_ key: String) -> String? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let i = pairs.firstIndex(where: { $0.key == key }) {
                if let v = newValue { pairs[i].value = v } else { pairs.remove(at: i) }
            } else if let v = newValue {
                pairs.append((key: key, value: v))
            }
        }
    }

    /// Makes room for `n` pairs at once, so properties assigned one by one are not regrown.
    mutating func reserveCapacity(_ n: Int) { pairs.reserveCapacity(n) }

    /// A property read as a BLIP boolean: `true`, `YES` (any case) or a non-zero integer.
    public func bool(_ key: String) -> Bool {
        guard let v = self[key] else { return false }
        if v.lowercased() == "true" || v.lowercased() == "yes" { return true }
        return (Int(v) ?? 0) != 0
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: String)]> { pairs.makeIterator() }

    public static func == (a: BLIPProperties, b: BLIPProperties) -> Bool {
        a.pairs.elementsEqual(b.pairs) { $0.key == $1.key && $0.value == $1.value }
    }

    /// The encoded block `key NUL value NUL …` (without the length varint).
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedLength)
        encode(into: &out)
        return out
    }

    /// The length of `encoded()`.
    public var encodedLength: Int { pairs.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 2 } }

    /// Appends the encoded block to `out`.
    public func encode(into out: inout [UInt8]) {
        for (k, v) in pairs {
            out.append(contentsOf: k.utf8); out.append(0)
            out.append(contentsOf: v.utf8); out.append(0)
        }
    }

    /// Decodes a properties block. Throws unless it is NUL-terminated, has an even number of
    /// strings, valid UTF-8 and no duplicate keys.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(BLIPError) -> BLIPProperties {
        if bytes.isEmpty { return BLIPProperties() }
        guard bytes[bytes.count - 1] == 0 else { throw .protocolError("properties not NUL-terminated") }
        // Pairs are built as the NULs are found, with no intermediate array of strings: this runs
        // once per message received.
        // Checked by our own validator (a bad byte is an error, not a replacement character),
        // once for the block: a NUL is never part of a multi-byte sequence, so the strings
        // between NULs are valid when the block is. Each is then built by `String(decoding:)`'s
        // specialized path: `String(validating:as:)` instantiated generic metadata on every call.
        guard UTF8Validator.isValid(bytes) else { throw .protocolError("properties not UTF-8") }
        var props = BLIPProperties()
        // Room for a usual message's handful of pairs at once, not grown one by one.
        props.pairs.reserveCapacity(Swift.min(8, bytes.count / 2))
        var key: String?
        var start = 0
        var seen: Set<String>?
        for i in 0..<bytes.count where bytes[i] == 0 {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<i])
            let s = String(decoding: slice.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
            start = i + 1
            guard let k = key else { key = s; continue }
            key = nil
            // A linear scan finds duplicates among the usual handful of keys; a set takes over
            // for long lists so a hostile block cannot cost quadratic time.
            if props.pairs.count < 16 {
                if props.pairs.contains(where: { $0.key == k }) { throw .protocolError("duplicate property \(k)") }
            } else {
                if seen == nil { seen = Set(props.pairs.map(\.key)) }
                guard seen?.insert(k).inserted ?? true else { throw .protocolError("duplicate property \(k)") }
            }
            props.pairs.append((key: k, value: s))
        }
        guard key == nil else { throw .protocolError("odd number of property strings") }
        return props
    }
}
