/// A database's name in a data directory and in URLs (`/{db}/...`), checked by CouchDB's rule:
/// a lowercase letter, then lowercase letters, digits and `_ $ ( ) + - /`, at most 238
/// characters. Names that would escape the directory or clash with Ferry's own files and
/// routes are refused too: no `..`, no leading or trailing `/`, no `//`.
public struct DatabaseName: Sendable, Hashable, CustomStringConvertible {
    /// The name as given.
    public let rawValue: String

    /// Why a name was refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// The name refused.
        public let name: String
        /// What is wrong with it.
        public let reason: String
        public var description: String { "invalid database name \(name.debugDescription): \(reason)" }
    }

    /// The longest name accepted (CouchDB's limit).
    public static let maxLength = 238

    /// A checked name; throws `Invalid` for one that breaks the rule.
    public init(_ name: String) throws(Invalid) {
        let u = Array(name.utf8)
        guard let first = u.first else { throw Invalid(name: name, reason: "empty") }
        guard u.count <= Self.maxLength else { throw Invalid(name: name, reason: "longer than \(Self.maxLength) characters") }
        guard first >= 0x61 && first <= 0x7A else { throw Invalid(name: name, reason: "must start with a lowercase letter") }
        for b in u {
            switch b {
            case 0x61...0x7A, 0x30...0x39: continue
            case UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "+"),
                 UInt8(ascii: "-"), UInt8(ascii: "/"): continue
            default:
                throw Invalid(name: name, reason: "only a-z, 0-9 and _ $ ( ) + - / are allowed")
            }
        }
        // `/` nests a database in a folder; it must not climb out of the data directory or
        // make an empty path segment.
        guard u.last != UInt8(ascii: "/"), !name.contains("//"), !name.split(separator: "/").contains("..") else {
            throw Invalid(name: name, reason: "not a path inside the data directory")
        }
        rawValue = name
    }

    public var description: String { rawValue }

    /// The file the database lives in, relative to the data directory: each `/` becomes a
    /// folder, so `team/tasks` is `team/tasks.ferry`.
    public var relativePath: String { rawValue + ".ferry" }
}
