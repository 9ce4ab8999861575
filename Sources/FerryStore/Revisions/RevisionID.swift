/// A revision ID, `<generation>-<digest>`: the generation is a positive decimal integer (root 1,
/// child = parent + 1) and the digest lowercase hex of even length (2–128 digits).
///
/// Ordering is the one every peer uses for tie-breaks: generation numerically, then digest
/// bytewise. Revision IDs received from peers are opaque; only the generation is interpreted.
public struct RevisionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Revision number along its branch (1 for a root).
    public let generation: Int
    private let stored: StoredDigest

    /// The digest as kept: the 40-digit SHA-1 of every revision made here (and by Couchbase)
    /// inline as 20 bytes, so IDs are made, hashed and compared without a heap string; any
    /// other length as its text. A given digest has exactly one form, so the synthesized
    /// equality and hashing are those of the text.
    private enum StoredDigest: Hashable, Sendable {
        /// Big-endian words: comparing them in order compares the bytes, and so the hex text.
        case sha1(UInt64, UInt64, UInt32)
        case text(String)
    }

    /// Lowercase hex digest.
    public var digest: String {
        switch stored {
        case .text(let t): return t
        case .sha1: return String(unsafeUninitializedCapacity: 40) { buffer in
            appendSHA1Hex(to: buffer.baseAddress!)
            return 40
        }
        }
    }

    /// The longest revision ID text accepted (generation + '-' + 128 hex digits, with room).
    public static let maxLength = 160

    /// Parses `text`, throwing `.invalidRevisionID` for anything but the strict syntax.
    public init(_ text: String) throws(StoreError) {
        var text = text
        let parsed = text.withUTF8 { RevisionID(parsing: UnsafeRawBufferPointer($0)) }
        guard let parsed else { throw .invalidRevisionID(text) }
        self = parsed
    }

    /// Parses the UTF-8 text of a revision ID (e.g. straight from a stored tree), or nil.
    init?(utf8 bytes: some Collection<UInt8>) {
        guard let parsed = bytes.withContiguousStorageIfAvailable({ RevisionID(parsing: UnsafeRawBufferPointer($0)) })
            ?? Array(bytes).withUnsafeBytes({ RevisionID(parsing: $0) }) else { return nil }
        self = parsed
    }

    /// Parses the UTF-8 text of a revision ID in `raw`, or nil.
    init?(parsing raw: UnsafeRawBufferPointer) {
        // Plain pointer loops: this runs several times per replicated document.
        let n = raw.count
        guard n >= 3, n <= Self.maxLength, let p = raw.baseAddress?.assumingMemoryBound(to: UInt8.self),
              p[0] != UInt8(ascii: "0") else { return nil }
        var g = 0, dash = 0
        while dash < n, p[dash] != UInt8(ascii: "-") {
            let d = p[dash] &- UInt8(ascii: "0")
            guard d < 10, dash < 9 else { return nil }
            g = g * 10 + Int(d)
            dash += 1
        }
        let hexCount = n - dash - 1
        guard dash >= 1, hexCount > 0, hexCount % 2 == 0, hexCount <= 128 else { return nil }
        let hex = p + dash + 1
        if hexCount == 40 {
            let h = UnsafeRawPointer(hex)
            guard let a = Hex.value8(at: h), let b = Hex.value8(at: h + 8), let c = Hex.value8(at: h + 16),
                  let d = Hex.value8(at: h + 24), let e = Hex.value8(at: h + 32) else { return nil }
            generation = g
            stored = .sha1(UInt64(a) << 32 | UInt64(b), UInt64(c) << 32 | UInt64(d), e)
        } else {
            for i in 0..<hexCount where Self.nibble(hex[i]) == nil { return nil }
            generation = g
            stored = .text(String(decoding: UnsafeBufferPointer(start: hex, count: hexCount), as: UTF8.self))
        }
    }

    /// The value of a lowercase hex digit, or nil.
    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt64? {
        let d = c &- UInt8(ascii: "0")
        if d < 10 { return UInt64(d) }
        let h = c &- UInt8(ascii: "a")
        if h < 6 { return UInt64(h) + 10 }
        return nil
    }

    /// A revision ID from parts already known to be valid (digests computed here).
    init(generation: Int, digest: [UInt8]) {
        self.generation = generation
        if digest.count == 20 {
            func word(_ bytes: ArraySlice<UInt8>) -> UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }
            stored = .sha1(word(digest[0..<8]), word(digest[8..<16]), UInt32(truncatingIfNeeded: word(digest[16..<20])))
        } else {
            stored = .text(Hex.encode(digest))
        }
    }

    /// Writes the 40 hex digits of an inline digest at `p`.
    private func appendSHA1Hex(to p: UnsafeMutablePointer<UInt8>) {
        guard case .sha1(let a, let b, let c) = stored else { return }
        let q = UnsafeMutableRawPointer(p)
        Hex.write8(UInt32(truncatingIfNeeded: a >> 32), to: q)
        Hex.write8(UInt32(truncatingIfNeeded: a), to: q + 8)
        Hex.write8(UInt32(truncatingIfNeeded: b >> 32), to: q + 16)
        Hex.write8(UInt32(truncatingIfNeeded: b), to: q + 24)
        Hex.write8(c, to: q + 32)
    }

    /// Appends the text (`<generation>-<digest>`) to `out`, without making a string.
    func appendText(to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: textCount))
        out.withUnsafeMutableBufferPointer { writeText(to: $0.baseAddress! + start) }
    }

    /// Calls `body` with the text in a stack buffer: for binding it to a statement without
    /// making a string (a heap allocation) first.
    func withText<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let count = textCount
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            guard let base = buffer.baseAddress else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
            writeText(to: base)
            return body(UnsafeBufferPointer(start: base, count: count))
        }
    }

    /// Writes the `textCount` bytes of the text at `p`.
    private func writeText(to p: UnsafeMutablePointer<UInt8>) {
        let digits = generationDigits
        var g = generation, i = digits - 1
        repeat {
            p[i] = UInt8(ascii: "0") + UInt8(g % 10)
            g /= 10
            i -= 1
        } while g > 0
        p[digits] = UInt8(ascii: "-")
        switch stored {
        case .text(let t):
            var k = digits + 1
            for b in t.utf8 { p[k] = b; k += 1 }
        case .sha1: appendSHA1Hex(to: p + digits + 1)
        }
    }

    private var generationDigits: Int {
        var n = 1, g = generation
        while g >= 10 { n += 1; g /= 10 }
        return n
    }

    /// The text's length in bytes.
    var textCount: Int {
        switch stored {
        case .text(let t): return generationDigits + 1 + t.utf8.count
        case .sha1: return generationDigits + 41
        }
    }

    public var description: String {
        let count = textCount
        return String(unsafeUninitializedCapacity: count) { buffer in
            writeText(to: buffer.baseAddress!)
            return count
        }
    }

    public static func < (a: RevisionID, b: RevisionID) -> Bool {
        if a.generation != b.generation { return a.generation < b.generation }
        if case .sha1(let a0, let a1, let a2) = a.stored, case .sha1(let b0, let b1, let b2) = b.stored {
            return (a0, a1, a2) < (b0, b1, b2)
        }
        return a.digest.utf8.lexicographicallyPrecedes(b.digest.utf8)
    }

    /// The ID of a new revision (Protocol/revisions.md, "Revision IDs": LiteCore's formula):
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
        var parent = parentText
        let digest = parent.withUTF8 { p in
            let n = min(p.count, 255)
            return withUnsafeBytes(of: UInt8(n)) { h in withUnsafeBytes(of: UInt8(deleted ? 1 : 0)) { t in
                canonicalBody.withUnsafeBytes { b in SHA1.digest(h, UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(p)[0..<n]), t, b) }
            } }
        }
        return RevisionID(generation: generation, digest: digest)
    }

}
