/// The properties of a BLIP message: ordered string pairs, encoded as
/// `key NUL value NUL …` behind a varint of their length (Protocol/blip.md §5).
public struct BLIPProperties: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral {
    /// The pairs in order.
    public private(set) var pairs: [(key: String, value: String)]

    /// Empty properties.
    public init() { pairs = [] }
    /// Properties from pairs, in this order.
    public init(_ pairs: [(String, String)]) { self.pairs = pairs.map { (key: $0.0, value: $0.1) } }
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
        for (k, v) in pairs {
            out.append(contentsOf: k.utf8); out.append(0)
            out.append(contentsOf: v.utf8); out.append(0)
        }
        return out
    }

    /// Decodes a properties block. Throws unless it is NUL-terminated, has an even number of
    /// strings, valid UTF-8 and no duplicate keys.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(BLIPError) -> BLIPProperties {
        if bytes.isEmpty { return BLIPProperties() }
        guard bytes[bytes.count - 1] == 0 else { throw .protocolError("properties not NUL-terminated") }
        var strings: [String] = []
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0 {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<i])
            guard let s = String(validating: slice, as: UTF8.self) else { throw .protocolError("properties not UTF-8") }
            strings.append(s)
            start = i + 1
        }
        guard strings.count % 2 == 0 else { throw .protocolError("odd number of property strings") }
        var props = BLIPProperties()
        var seen = Set<String>()
        for i in stride(from: 0, to: strings.count, by: 2) {
            guard seen.insert(strings[i]).inserted else { throw .protocolError("duplicate property \(strings[i])") }
            props.pairs.append((key: strings[i], value: strings[i + 1]))
        }
        return props
    }
}
