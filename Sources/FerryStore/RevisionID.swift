import COpenSSL

/// A revision ID, `<generation>-<digest>`: the generation is a positive decimal integer (root 1,
/// child = parent + 1) and the digest lowercase hex of even length (2–128 digits).
///
/// Ordering is the one every peer uses for tie-breaks: generation numerically, then digest
/// bytewise. Revision IDs received from peers are opaque; only the generation is interpreted.
public struct RevisionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Revision number along its branch (1 for a root).
    public let generation: Int
    /// Lowercase hex digest.
    public let digest: String

    /// The longest revision ID text accepted (generation + '-' + 128 hex digits, with room).
    public static let maxLength = 160

    /// Parses `text`, throwing `.invalidRevisionID` for anything but the strict syntax.
    public init(_ text: String) throws(StoreError) {
        guard text.utf8.count <= Self.maxLength,
              let dash = text.utf8.firstIndex(of: UInt8(ascii: "-")) else { throw .invalidRevisionID(text) }
        let genPart = text.utf8[..<dash]
        let hexPart = text.utf8[text.utf8.index(after: dash)...]
        guard let first = genPart.first, first != UInt8(ascii: "0"), genPart.count <= 9,
              genPart.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              !hexPart.isEmpty, hexPart.count % 2 == 0, hexPart.count <= 128,
              hexPart.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        else { throw .invalidRevisionID(text) }
        var g = 0
        for c in genPart { g = g * 10 + Int(c - UInt8(ascii: "0")) }
        self.generation = g
        self.digest = String(decoding: hexPart, as: UTF8.self)
    }

    /// A revision ID from parts already known to be valid (digests computed here).
    init(generation: Int, digest: String) {
        self.generation = generation
        self.digest = digest
    }

    public var description: String { "\(generation)-\(digest)" }

    public static func < (a: RevisionID, b: RevisionID) -> Bool {
        if a.generation != b.generation { return a.generation < b.generation }
        return a.digest.utf8.lexicographicallyPrecedes(b.digest.utf8)
    }

    /// The ID of a new revision (reference §4.1, LiteCore's formula):
    /// `SHA1( u8(min(len(parent),255)) ‖ parent[0..<that] ‖ u8(deleted ? 1 : 0) ‖ canonicalBody )`,
    /// generation = parent's + 1 (1 without a parent). `canonicalBody` must be the canonical
    /// JSON of the body without meta keys (`{}` for an empty tombstone).
    public static func make(parent: RevisionID?, deleted: Bool, canonicalBody: [UInt8]) -> RevisionID {
        make(parentText: parent?.description ?? "", generation: (parent?.generation ?? 0) + 1,
             deleted: deleted, canonicalBody: canonicalBody)
    }

    /// The formula on the parent's text, so the 255-byte truncation can be checked with
    /// parents longer than any `RevisionID` this store accepts.
    static func make(parentText: String, generation: Int, deleted: Bool, canonicalBody: [UInt8]) -> RevisionID {
        let parentBytes = Array(parentText.utf8)
        let n = min(parentBytes.count, 255)
        var input: [UInt8] = []
        input.reserveCapacity(2 + n + canonicalBody.count)
        input.append(UInt8(n))
        input.append(contentsOf: parentBytes[0..<n])
        input.append(deleted ? 1 : 0)
        input.append(contentsOf: canonicalBody)
        return RevisionID(generation: generation, digest: hex(sha1(input)))
    }

    static func sha1(_ input: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &len, EVP_sha1(), nil)
        return Array(digest[..<Int(len)])
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = CanonicalJSON.hexDigits
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
