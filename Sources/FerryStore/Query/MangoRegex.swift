import Foundation
import Synchronization

/// A `$regex` pattern compiled once (CouchDB runs Erlang's PCRE; Ferry ICU's engine through
/// `NSRegularExpression`, which reads the same syntax but for PCRE's rarer constructs —
/// Protocol/rest.md, "Deliberate differences from CouchDB"). A match is found anywhere in
/// the string, as `re:run` finds it.
final class MangoRegex: @unchecked Sendable {
    // @unchecked: NSRegularExpression is immutable once made, and documented as safe to use
    // from several threads at once.
    private let expression: NSRegularExpression

    private static let cache = Mutex<[String: MangoRegex]>([:])

    /// The compiled `pattern`, nil when it does not compile.
    init?(_ pattern: String) {
        guard let e = try? NSRegularExpression(pattern: pattern) else { return nil }
        expression = e
    }

    /// The compiled pattern, from a cache of the latest ones used.
    static func compiled(_ pattern: String) -> MangoRegex? {
        if let hit = cache.withLock({ $0[pattern] }) { return hit }
        guard let made = MangoRegex(pattern) else { return nil }
        cache.withLock { c in
            if c.count > 256 { c.removeAll() }
            c[pattern] = made
        }
        return made
    }

    /// Whether the pattern matches somewhere in `s`.
    func matches(_ s: String) -> Bool {
        expression.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
    }
}
