import Synchronization

/// Counts failed logins per client address and per user name and, past a few, refuses that
/// address or user for a delay that doubles with each further failure — `429 Too Many
/// Requests` with `Retry-After` instead of another PBKDF2 run (docs/daemon.md, "Limits").
///
/// Only logins that would need a password check are throttled: a credential already verified,
/// a session cookie or a client certificate is answered as before, so a good client behind the
/// same address as an attacker keeps working once it has logged in. A user's own count (many
/// addresses guessing one account) allows more failures — `userFreeFailures` — and refuses
/// only addresses that have failed themselves, so an attack on an account does not lock its
/// owner out of a clean address. A success clears the address's and the user's count. Memory
/// is bounded: at most `maxEntries` offenders are tracked, the quietest forgotten first.
public final class FailureThrottle: Sendable {
    /// How many failures are free and how the delay grows after them.
    public struct Limits: Sendable, Equatable {
        /// Failures from one address answered 401; after the last of them, its delay starts.
        public var freeFailures = 5
        /// Failures for one user (from any addresses) before its delay starts.
        public var userFreeFailures = 50
        /// The delay after the first failure past the free ones; it doubles with each more.
        public var baseDelay: Duration = .seconds(1)
        /// The longest delay.
        public var maxDelay: Duration = .seconds(300)
        /// A count is forgotten when its last failure is this old.
        public var forgetAfter: Duration = .seconds(900)
        /// Offenders tracked at most (addresses and users together).
        public var maxEntries = 10_000
        /// Password checks one address may have queued or running at once: a client that
        /// sends more in parallel is flooding, and gets 429 at once instead of a place in the
        /// queue.
        public var checksPerAddress = 2
        /// No throttling at all (tests that hammer one user with wrong passwords on purpose).
        public static let off: Limits = { var l = Limits(freeFailures: .max); l.checksPerAddress = .max; return l }()

        /// Failures free for an offender of this kind.
        func free(_ kind: String) -> Int { kind == "user" ? userFreeFailures : freeFailures }

        /// The defaults: five free failures, then 1 s doubling up to 5 minutes.
        public init(freeFailures: Int = 5, baseDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(300)) {
            self.freeFailures = freeFailures
            userFreeFailures = freeFailures > Int.max / 10 ? Int.max : freeFailures * 10
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
        }
    }

    /// Who failed: a client address (its host, without the port) and the user name tried.
    public struct Offender: Sendable, Hashable {
        /// `address` or `user`.
        public let kind: String
        /// The address or the name.
        public let value: String
    }

    private struct Entry {
        var failures = 0
        var until: ContinuousClock.Instant?
        var last: ContinuousClock.Instant
        /// Whether this offender's refusal was logged (once per offender until it is forgotten).
        var logged = false
    }

    private struct State {
        /// Password checks queued or running, per address.
        var checking: [String: Int] = [:]
        var entries: [Offender: Entry] = [:]
        var failures = 0
        var refusals = 0
    }

    private let state = Mutex(State())
    /// The limits in force.
    public let limits: Limits

    /// A throttle with these limits.
    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Failed logins counted so far (every one, throttled or not).
    public var failureCount: Int { state.withLock { $0.failures } }
    /// Logins refused with 429 so far.
    public var refusalCount: Int { state.withLock { $0.refusals } }

    /// The offenders a login from `address` as `user` would be counted against.
    static func offenders(address: String?, user: String) -> [Offender] {
        var out = [Offender(kind: "user", value: user)]
        if let address { out.append(Offender(kind: "address", value: address)) }
        return out
    }

    /// How long until a login from `address` as `user` may be tried, or nil when it may now;
    /// counts a refusal. `firstRefusal` names the offender whose first refusal this is (to be
    /// logged once).
    func refusal(address: String?, user: String, now: ContinuousClock.Instant = .now) -> (wait: Duration, firstRefusal: Offender?)? {
        state.withLock { s in
            var wait: Duration = .zero
            var first: Offender?
            let addressFailed = address.map { s.entries[Offender(kind: "address", value: $0)] != nil } ?? true
            for o in Self.offenders(address: address, user: user) {
                guard let e = s.entries[o], let until = e.until, until > now else { continue }
                if o.kind == "user" && !addressFailed { continue }
                wait = max(wait, until - now)
                if !e.logged {
                    s.entries[o]?.logged = true
                    first = o
                }
            }
            guard wait > .zero else { return nil }
            s.refusals += 1
            return (wait, first)
        }
    }

    /// Counts a failed login from `address` as `user`.
    func recordFailure(address: String?, user: String, now: ContinuousClock.Instant = .now) {
        state.withLock { s in
            s.failures += 1
            if s.entries.count >= limits.maxEntries { prune(&s, now: now) }
            for o in Self.offenders(address: address, user: user) {
                var e = s.entries[o] ?? Entry(last: now)
                if now - e.last > limits.forgetAfter { e = Entry(last: now) }
                e.failures += 1
                e.last = now
                // The free failures are answered 401; the one that uses the last of them
                // starts the delay, so the next try is refused.
                let over = e.failures - limits.free(o.kind) + 1
                if over > 0 { e.until = now + delay(after: over) }
                s.entries[o] = e
            }
        }
    }

    /// Whether `address` may start another password check now (false: it has
    /// `limits.checksPerAddress` already, a refusal is counted); call `endCheck` after one started.
    func beginCheck(address: String?) -> Bool {
        guard let address else { return true }
        return state.withLock { s in
            guard s.checking[address, default: 0] < limits.checksPerAddress else {
                s.refusals += 1
                return false
            }
            s.checking[address, default: 0] += 1
            return true
        }
    }

    /// A check `beginCheck` let start has ended.
    func endCheck(address: String?) {
        guard let address else { return }
        state.withLock { s in
            let left = s.checking[address, default: 1] - 1
            s.checking[address] = left > 0 ? left : nil
        }
    }

    /// A login from `address` as `user` succeeded: both counts start again.
    func recordSuccess(address: String?, user: String) {
        state.withLock { s in
            for o in Self.offenders(address: address, user: user) where s.entries[o] != nil { s.entries[o] = nil }
        }
    }

    /// The delay after the `over`-th failure past the free ones: base × 2^(over−1), capped.
    func delay(after over: Int) -> Duration {
        var d = limits.baseDelay
        for _ in 1..<max(1, min(over, 40)) {
            d *= 2
            if d >= limits.maxDelay { return limits.maxDelay }
        }
        return min(d, limits.maxDelay)
    }

    /// Forgets entries past `forgetAfter`, then (still full) the half that failed longest ago.
    private func prune(_ s: inout State, now: ContinuousClock.Instant) {
        s.entries = s.entries.filter { now - $0.value.last <= limits.forgetAfter }
        guard s.entries.count >= limits.maxEntries else { return }
        let keep = s.entries.sorted { $0.value.last > $1.value.last }.prefix(limits.maxEntries / 2)
        s.entries = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
    }
}
