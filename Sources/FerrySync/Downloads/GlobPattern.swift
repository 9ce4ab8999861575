/// A glob in which `*` matches any run of characters (none included) and every other character
/// only itself — the one wildcard download rules need, with no escaping to learn.
struct GlobPattern: Sendable {
    /// The literal pieces between the stars.
    private let pieces: [[UInt8]]
    private let anchoredStart: Bool
    private let anchoredEnd: Bool

    /// Compiles `pattern`.
    init(_ pattern: String) {
        let bytes = Array(pattern.utf8)
        pieces = bytes.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map(Array.init)
        anchoredStart = bytes.first != UInt8(ascii: "*")
        anchoredEnd = bytes.last != UInt8(ascii: "*")
    }

    /// Whether the whole of `text` matches. Works on UTF-8 bytes: a literal piece begins with a
    /// character's first byte, which no continuation byte equals, so a match never splits one.
    func matches(_ text: String) -> Bool {
        let t = Array(text.utf8)
        // No star: the pattern is one literal.
        if pieces.count == 1 { return t == pieces[0] }
        var start = 0
        var end = t.count
        let first = pieces[0], last = pieces[pieces.count - 1]
        if anchoredStart {
            guard t.starts(with: first) else { return false }
            start = first.count
        }
        if anchoredEnd {
            guard end - start >= last.count, t[(end - last.count)...].elementsEqual(last) else { return false }
            end -= last.count
        }
        // The pieces between are found left to right, each at its first place: taking the
        // earliest match always leaves the most room for the rest, so no backtracking is needed.
        for piece in pieces.dropFirst().dropLast() where !piece.isEmpty {
            guard let at = Self.find(piece, in: t, from: start, to: end) else { return false }
            start = at + piece.count
        }
        return start <= end
    }

    private static func find(_ piece: [UInt8], in t: [UInt8], from: Int, to: Int) -> Int? {
        guard to - from >= piece.count else { return nil }
        for i in from...(to - piece.count) where t[i..<(i + piece.count)].elementsEqual(piece) { return i }
        return nil
    }
}
