import Synchronization
import _FoundationICU

/// A `$regex` pattern compiled once (CouchDB runs Erlang's PCRE; Ferry ICU's regular
/// expressions, the engine behind Foundation's `NSRegularExpression`, which reads the same syntax
/// but for PCRE's rarer constructs — Protocol/rest.md, "Deliberate differences from CouchDB").
/// A match is found anywhere in the string, as `re:run` finds it.
final class MangoRegex: @unchecked Sendable {
    // @unchecked: `compiled` is only read, by uregex_clone, which ICU documents as safe to call
    // on one pattern from several threads; each clone (a matcher, with its own state) is used by
    // one thread at a time, handed out and taken back under `idle`'s lock.
    private let compiled: OpaquePointer
    private let idle = Mutex<[Matcher]>([])

    private struct Matcher: @unchecked Sendable {
        // @unchecked: see MangoRegex; a Matcher is only ever in `idle` or in one call.
        let pointer: OpaquePointer
    }

    private static let cache = Mutex<[String: MangoRegex]>([:])
    /// Matchers kept per pattern for reuse (more concurrent queries make and close their own).
    private static let idleLimit = 8

    /// The compiled `pattern`, nil when it does not compile.
    init?(_ pattern: String) {
        let units = Array(pattern.utf16)
        var status = U_ZERO_ERROR
        let made = units.withUnsafeBufferPointer { p in
            swift_uregex_open(p.baseAddress, Int32(p.count), 0, nil, &status)
        }
        guard let made, status.rawValue <= U_ZERO_ERROR.rawValue else {
            if let made { swift_uregex_close(made) }
            return nil
        }
        compiled = made
    }

    deinit {
        for m in idle.withLock({ $0 }) { swift_uregex_close(m.pointer) }
        swift_uregex_close(compiled)
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
        guard let matcher = take() else { return false }
        defer {
            idle.withLock { list in
                if list.count < Self.idleLimit { list.append(matcher) } else { swift_uregex_close(matcher.pointer) }
            }
        }
        // ICU matches UTF-16; the matcher keeps a pointer to the text, used only inside this scope.
        let count = s.utf16.count
        guard count <= Int(Int32.max) else { return false }
        return withUnsafeTemporaryAllocation(of: UInt16.self, capacity: max(count, 1)) { buffer in
            _ = buffer.initialize(from: s.utf16)
            var status = U_ZERO_ERROR
            swift_uregex_setText(matcher.pointer, buffer.baseAddress, Int32(count), &status)
            let found = swift_uregex_find(matcher.pointer, 0, &status) != 0
            return found && status.rawValue <= U_ZERO_ERROR.rawValue
        }
    }

    private func take() -> Matcher? {
        if let m = idle.withLock({ $0.popLast() }) { return m }
        var status = U_ZERO_ERROR
        guard let m = swift_uregex_clone(compiled, &status), status.rawValue <= U_ZERO_ERROR.rawValue else { return nil }
        return Matcher(pointer: m)
    }
}
