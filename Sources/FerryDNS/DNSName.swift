/// A domain name: its labels from the most specific to the top, without the root
/// (Protocol/dns-sd.md, "Names"). `Molly’s Mac._ferry._tcp.local` is the labels
/// `["Molly’s Mac", "_ferry", "_tcp", "local"]`; the root name has no labels.
///
/// Every value is valid: each label is 1 to 63 bytes of UTF-8 and the whole name is at most
/// 255 bytes in wire form (RFC 1035 §3.1). A label may hold any character, dots and spaces
/// included (RFC 6763 §4.3: an instance name is free text).
///
/// Names compare and hash ASCII case-insensitively (RFC 6762 §16): `Foo.local` equals
/// `foo.LOCAL`. Other bytes compare exactly, so two spellings of the same Unicode text in
/// different normal forms are different names (RFC 6762 §16 asks senders to use NFC).
public struct DNSName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The labels, most specific first, without the root. Read-only so that every name stays
    /// valid; make a new one with `init(labels:)`, `appending(_:)` or `prepending(label:)`.
    public private(set) var labels: [String]

    /// The name made of `labels` (most specific first, no root). Throws `labelTooLong` for a
    /// label over 63 bytes of UTF-8, `invalidName` for an empty label, `nameTooLong` when the
    /// wire form would exceed 255 bytes.
    public init(labels: [String]) throws(DNSError) {
        var wire = 1
        for label in labels {
            let n = label.utf8.count
            guard n > 0 else { throw .invalidName("empty label") }
            guard n <= 63 else { throw .labelTooLong }
            wire += 1 + n
        }
        guard wire <= 255 else { throw .nameTooLong }
        self.labels = labels
    }

    /// Labels already checked (the decoder checks them as it reads).
    init(checked labels: [String]) {
        self.labels = labels
    }

    /// The name written as dotted text: labels separated by `.`, `\.` for a dot inside a label
    /// and `\\` for a backslash (RFC 1035 §5.1), a trailing dot optional; `""` and `"."` are the
    /// root. A backslash before any other character stands for that character, except before a
    /// digit: the `\DDD` decimal form is refused (`invalidName`) rather than misread.
    ///
    ///     try DNSName("Molly\\.s Mac._ferry._tcp.local").labels  // ["Molly.s Mac", "_ferry", "_tcp", "local"]
    ///
    /// Called with a string *literal*, `DNSName("…")` is `init(stringLiteral:)` instead (Swift
    /// reads `T("literal")` as the literal, SE-0213), which stops the program on an invalid
    /// name. Text from outside is never a literal, so it always comes here.
    public init(_ dotted: String) throws(DNSError) {
        let bytes = Array(dotted.utf8)
        var labels: [String] = []
        var current: [UInt8] = []
        // "." alone is the root, which has no label; everywhere else a dot ends a label.
        var i = bytes == [UInt8(ascii: ".")] ? 1 : 0
        // Byte by byte is safe for UTF-8: the bytes of a multi-byte character are all ≥ 0x80,
        // so they are never taken for a dot or a backslash.
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\\") {
                guard i + 1 < bytes.count else { throw .invalidName("ends with a lone backslash") }
                let next = bytes[i + 1]
                guard !(0x30...0x39).contains(next) else { throw .invalidName("\\DDD escapes are not supported") }
                current.append(next)
                i += 2
            } else if b == UInt8(ascii: ".") {
                guard !current.isEmpty else { throw .invalidName("empty label in \"\(dotted)\"") }
                labels.append(String(decoding: current, as: UTF8.self))
                current = []
                i += 1
            } else {
                current.append(b)
                i += 1
            }
        }
        if !current.isEmpty { labels.append(String(decoding: current, as: UTF8.self)) }
        try self.init(labels: labels)
    }

    /// A name written in code, parsed as `init(_:)` parses text. An invalid literal is a
    /// programming error and stops the program; use `init(_:)` for text from elsewhere.
    public init(stringLiteral value: String) {
        do {
            try self.init(value)
        } catch {
            preconditionFailure("invalid DNS name literal \"\(value)\": \(error)")
        }
    }

    /// The root name (no labels), written `.`.
    public static let root = DNSName(checked: [])

    /// The length of the name in uncompressed wire form: a length byte and the bytes of each
    /// label, and the root's zero byte. At most 255.
    public var wireLength: Int { labels.reduce(1) { $0 + 1 + $1.utf8.count } }

    /// This name followed by `other` (`"Molly’s Mac"` + `_ferry._tcp.local`), or nil if the
    /// result would be longer than 255 bytes.
    public func appending(_ other: DNSName) -> DNSName? {
        try? DNSName(labels: labels + other.labels)
    }

    /// `label` followed by this name, or nil if `label` is empty or over 63 bytes or the result
    /// would be longer than 255 bytes.
    public func prepending(label: String) -> DNSName? {
        try? DNSName(labels: [label] + labels)
    }

    /// Whether this name ends with the labels of `suffix`, compared as names are (ASCII
    /// case-insensitively). Every name ends with the root; a name ends with itself.
    public func hasSuffix(_ suffix: DNSName) -> Bool {
        guard suffix.labels.count <= labels.count else { return false }
        return zip(labels.suffix(suffix.labels.count), suffix.labels).allSatisfy(Self.labelsEqual)
    }

    /// Dotted text with `.` and `\` inside labels escaped, without a trailing dot; `.` for the
    /// root. `init(_:)` reads it back to the same labels.
    public var description: String {
        guard !labels.isEmpty else { return "." }
        return labels.map { label in
            var out = ""
            for c in label.unicodeScalars {
                if c == "." || c == "\\" { out.unicodeScalars.append("\\") }
                out.unicodeScalars.append(c)
            }
            return out
        }.joined(separator: ".")
    }

    /// ASCII case-insensitive, by the labels' UTF-8 bytes (RFC 6762 §16). Not `String`'s `==`:
    /// that one treats canonically equivalent texts as equal, which the wire does not.
    public static func == (a: DNSName, b: DNSName) -> Bool {
        a.labels.count == b.labels.count && zip(a.labels, b.labels).allSatisfy(labelsEqual)
    }

    /// Consistent with `==`: the labels' bytes with ASCII letters lowered.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(labels.count)
        for label in labels {
            hasher.combine(label.utf8.count)
            for b in label.utf8 { hasher.combine(Self.lower(b)) }
        }
    }

    static func labelsEqual(_ x: String, _ y: String) -> Bool {
        let a = x.utf8, b = y.utf8
        return a.count == b.count && zip(a, b).allSatisfy { lower($0) == lower($1) }
    }

    /// ASCII lowercase; every other byte unchanged.
    static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
}
