import COpenSSL
import FerryNet
import FerryStore
import FoundationEssentials
import Logging
import Synchronization

/// Who may do what on a daemon (Protocol/rest.md, "Access control"): authenticates a request
/// (HTTP Basic against the users file, or a TLS client certificate mapped to a user) and
/// gives the identity's role on a database. The same decision serves REST and BLIP.
///
/// Password checks cost a full PBKDF2 run (about 0.2 s at 600,000 iterations): they run on a
/// small bounded pool of their own (`PasswordCheckPool`), and a successful check is
/// remembered — keyed by a SHA-256 of user and password, and only while the user's stored hash
/// is unchanged — so a keep-alive client or a replicator's reconnects pay it once. CouchDB's
/// `AuthSession` cookies (`SessionCookie`) cost one HMAC. The users file is re-read when it changes on disk (checked at most
/// once a second), so `ferry user add` takes effect on a running daemon.
public final class AccessControl: Sendable {
    /// Who a request comes from.
    public enum Identity: Sendable, Equatable, CustomStringConvertible {
        /// No credentials.
        case anonymous
        /// A user of the users file (or of the fixed list).
        case user(String)
        /// The bearer of the daemon's local token (`DaemonEndpoint`): the owner of the data
        /// directory, a server admin.
        case localAdmin

        public var description: String {
            switch self {
            case .anonymous: return "anonymous"
            case .user(let name): return name
            case .localAdmin: return "_local_admin"
            }
        }
    }

    /// What anonymous requests may do.
    public struct Policy: Sendable, Equatable {
        /// Whether requests without credentials are let in at all.
        public var allowAnonymous = false
        /// Their role on every database when they are.
        public var anonymousRole = Role.writer
        /// Seconds an `AuthSession` cookie stays valid after it is issued or renewed
        /// (CouchDB's `[chttpd_auth] timeout`, default 600).
        public var sessionTimeout = 600
        /// The session cookie's `SameSite` attribute (CouchDB's `[chttpd_auth] same_site`).
        public var cookieSameSite = SessionCookie.SameSite.lax
        /// When failed logins from one address or for one user start getting 429
        /// (`FailureThrottle`).
        public var failureLimits = FailureThrottle.Limits()
        /// The defaults: no anonymous access.
        public init() {}
    }

    private struct State {
        var users: [String: UserRecord]
        var modified: Date?
        var lastCheck = ContinuousClock.now
        /// sha256(name:password) → the user and the hash the password was verified
        /// against (the entry holds only while the user's stored hash is that one).
        var verified: [String: (user: String, hash: PasswordHash)] = [:]
        /// The same key for a name and password that failed against this hash: a client
        /// repeating a wrong password costs a dictionary lookup, not another PBKDF2 run.
        var refused: [String: PasswordHash] = [:]
        /// Authorization fields as sent that proved a user, by their fingerprint, with the
        /// hash they were verified against: the common request skips decoding and SHA-256.
        var recognised: [CredentialFingerprint: (user: String, hash: PasswordHash)] = [:]
    }

    private let store: UserStore?
    private let state: Mutex<State>
    /// The policy for anonymous requests.
    public let policy: Policy
    /// Signs `AuthSession` cookies (`SessionSecret`).
    private let sessionSecret: [UInt8]
    /// Where password checks run.
    private let checks: PasswordCheckPool
    /// Failed logins per address and per user, and the delays they earn.
    public let throttle: FailureThrottle
    private let logger = Logger(label: "ferry.access")
    private var sessionTimeout: Int64 { Int64(max(1, policy.sessionTimeout)) }

    /// Access from the users file at `store` (re-read when it changes); session cookies are
    /// signed with the secret kept beside it (`_session_secret`, made on first start).
    public init(store: UserStore, policy: Policy, checks: PasswordCheckPool = .shared) throws(UserStore.Failure) {
        self.store = store
        self.policy = policy
        self.checks = checks
        throttle = FailureThrottle(limits: policy.failureLimits)
        sessionSecret = try SessionSecret.loadOrCreate(at: SessionSecret.path(besideUsersFile: store.path))
        state = Mutex(State(users: try store.load(), modified: Self.modified(store.path)))
    }

    /// Access for a fixed set of users (the `--user`/`--password` flags of a one-file peer);
    /// its session cookies end with the process (a random secret of its own).
    public init(users: [UserRecord], policy: Policy, checks: PasswordCheckPool = .shared) {
        store = nil
        self.policy = policy
        self.checks = checks
        throttle = FailureThrottle(limits: policy.failureLimits)
        // RAND_bytes fails only without an entropy source; then a UUID's randomness is the
        // best left, and the cookies it signs still need the password hash too.
        sessionSecret = (try? SessionSecret.random()) ?? Array((UUID().uuidString + UUID().uuidString).utf8)
        state = Mutex(State(users: Dictionary(users.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })))
    }

    /// Whether any user exists (else only anonymous access, if allowed, gets in).
    public var hasUsers: Bool { currentUsers().isEmpty == false }

    /// How a request proved who it is.
    public struct Authentication: Sendable, Equatable {
        /// Who it is.
        public var identity: Identity
        /// `cookie` (an `AuthSession` cookie), `default` (HTTP Basic or the local token, as
        /// CouchDB names its Basic handler), `certificate` (a TLS client certificate), or nil
        /// (anonymous) — `GET /_session`'s `info.authenticated`.
        public var method: String?
    }

    /// Authenticates a request from its `AuthSession` cookie, `Authorization` field and TLS
    /// client certificate, in CouchDB's order: a valid cookie wins; one that fails to verify
    /// (expired, forged, its user gone or their password changed) is ignored, as CouchDB does;
    /// a malformed one is 400. Wrong Basic credentials are refused even when anonymous access
    /// is on. A password check runs on `checks` (503 when its queue is full), never on the
    /// caller's thread; `address` (the client's host) is what `throttle` counts failures by.
    public func authenticate(authorization: String?, cookie: String?, certificate: TLSCertificate?,
                             address: String? = nil) async -> Result<Authentication, RESTError> {
        switch SessionCookie.parse(cookieHeader: cookie) {
        case .absent: break
        case .malformed: return .failure(.badRequest("Malformed AuthSession cookie. Please clear your cookies."))
        case .cookie(let c):
            if verify(c, now: Self.now()) { return .success(Authentication(identity: .user(c.user), method: "cookie")) }
        }
        if let authorization, authorization.hasPrefix("Bearer ") {
            guard let token = localToken.withLock({ $0 }), Self.constantTimeEqual(Array(authorization.utf8.dropFirst(7)), Array(token.utf8)) else {
                return .failure(.unauthorized("the bearer token is not this daemon's"))
            }
            return .success(Authentication(identity: .localAdmin, method: "default"))
        }
        if let authorization {
            let fingerprint = CredentialFingerprint(authorization)
            if let seen = state.withLock({ $0.recognised[fingerprint] }), currentUsers()[seen.user]?.password == seen.hash {
                return .success(Authentication(identity: .user(seen.user), method: "default"))
            }
            guard let (name, password) = Self.basicCredentials(authorization) else {
                return .failure(.unauthorized("only HTTP Basic authentication is supported"))
            }
            let checked = await checkPassword(name: name, password: password, address: address)
            if case .success(let user) = checked, let hash = currentUsers()[user]?.password {
                state.withLock { s in
                    if s.recognised.count > 10_000 { s.recognised.removeAll() }
                    s.recognised[fingerprint] = (user, hash)
                }
            }
            return checked.map { Authentication(identity: .user($0), method: "default") }
        }
        if let certificate {
            let digest = "sha256:" + Hex.encode(certificate.sha256)
            let cn = certificate.commonName.map { "cn:" + $0 }
            let names = [digest] + (cn.map { [$0] } ?? [])
            if let user = currentUsers().values.first(where: { u in names.contains { u.certificates.contains($0) } }) {
                return .success(Authentication(identity: .user(user.name), method: "certificate"))
            }
        }
        guard policy.allowAnonymous else { return .failure(.unauthorized("Authentication required.")) }
        return .success(Authentication(identity: .anonymous, method: nil))
    }

    /// Checks a user's password (HTTP Basic, `POST /_session`) and gives the user's name.
    /// A successful check is remembered (keyed by a SHA-256 of name and password, valid while
    /// the user's stored hash is unchanged), so a client that sends Basic on every request pays
    /// PBKDF2 once; so is a failed one, so repeating a wrong password costs nothing either. A
    /// check that is due runs on the pool. 401 for a wrong name or password, 429 with
    /// `Retry-After` while `address` or `name` has failed too often (`FailureThrottle`), 503
    /// when the pool's queue is full.
    public func checkPassword(name: String, password: String, address: String? = nil) async -> Result<String, RESTError> {
        let users = currentUsers()
        // The password itself is never kept, only this digest of it.
        let key = Self.sha256Hex(Array("\(name):\(password)".utf8))
        let (hit, miss) = state.withLock { ($0.verified[key], $0.refused[key]) }
        if let hit, users[hit.user]?.password == hit.hash { return .success(hit.user) }
        if let refusal = throttle.refusal(address: address, user: name) {
            if let o = refusal.firstRefusal {
                logger.warning("too many failed logins: refusing for a while", metadata: [o.kind: "\(o.value)", "retry_after_s": "\(refusal.wait.components.seconds + 1)"])
            }
            await Self.tarpit(refusal.wait)
            return .failure(.tooManyRequests(retryAfter: Int(refusal.wait.components.seconds) + 1))
        }
        guard let user = users[name], let hash = user.password else {
            throttle.recordFailure(address: address, user: name)
            return .failure(.unauthorized())
        }
        if let miss, miss == hash {
            throttle.recordFailure(address: address, user: name)
            return .failure(.unauthorized())
        }
        guard throttle.beginCheck(address: address) else {
            await Self.tarpit(.seconds(1))
            return .failure(.tooManyRequests(retryAfter: 1))
        }
        defer { throttle.endCheck(address: address) }
        let ok: Bool
        do { ok = try await checks.run { hash.matches(password) } } catch {
            return .failure(RESTError(503, "service_unavailable", "too many password checks are waiting; retry in a moment", retryAfter: 1))
        }
        guard ok else {
            throttle.recordFailure(address: address, user: name)
            state.withLock { s in
                if s.refused.count > 10_000 { s.refused.removeAll() }
                s.refused[key] = hash
            }
            return .failure(.unauthorized())
        }
        throttle.recordSuccess(address: address, user: name)
        state.withLock { s in
            if s.verified.count > 10_000 { s.verified.removeAll() }
            s.verified[key] = (name, hash)
        }
        return .success(name)
    }

    /// Holds a refusal back for up to a second before it is answered: a client hammering on
    /// keep-alive connections then sends about one request per connection per second instead
    /// of as many as the daemon can refuse. Holding costs a suspended task, no thread; a client
    /// that leaves ends the wait.
    static func tarpit(_ wait: Duration) async {
        try? await Task.sleep(for: min(wait, .seconds(1)))
    }

    /// A fresh `AuthSession` cookie value for `user` (who just proved their password); nil
    /// when the user has no password (certificate-only users cannot hold a session).
    public func issueCookie(for user: String, now: Int64 = AccessControl.now()) -> String? {
        guard let hash = currentUsers()[user]?.password else { return nil }
        return SessionCookie(user: user, timestamp: now, key: SessionCookie.key(secret: sessionSecret, passwordHash: hash)).value
    }

    /// Whether a cookie is one this server issued to the user as they are now (same password
    /// hash) and has not expired.
    func verify(_ cookie: SessionCookie, now: Int64) -> Bool {
        guard cookie.secondsLeft(now: now, timeout: sessionTimeout) > 0,
              let hash = currentUsers()[cookie.user]?.password else { return false }
        return cookie.isSigned(with: SessionCookie.key(secret: sessionSecret, passwordHash: hash))
    }

    /// The `Set-Cookie` value that renews the request's `AuthSession` cookie, when it is valid
    /// and more than a tenth of its timeout has passed (CouchDB sends it on any answer).
    public func renewal(cookie: String?, secure: Bool = false) -> String? {
        guard case .cookie(let c) = SessionCookie.parse(cookieHeader: cookie) else { return nil }
        let now = Self.now()
        guard verify(c, now: now), c.needsRenewal(now: now, timeout: sessionTimeout),
              let fresh = issueCookie(for: c.user, now: now) else { return nil }
        return SessionCookie.setCookie(fresh, now: now, timeout: sessionTimeout, secure: secure, sameSite: policy.cookieSameSite)
    }

    /// Seconds since 1970, as cookie timestamps count.
    public static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// The identity's role on database `db`; nil = no access.
    public func role(of identity: Identity, on db: String) -> Role? {
        switch identity {
        case .anonymous: return policy.allowAnonymous ? policy.anonymousRole : nil
        case .user(let name):
            guard let user = currentUsers()[name] else { return nil }
            let own = user.role(on: db)
            // A database's `_security` adds to the users file's roles; `*` has none.
            guard own != .admin, db != "*", let lookup = securityLookup.withLock({ $0 }), let security = lookup(db) else { return own }
            let granted = security.role(for: name, groups: user.groups, serverAdmin: user.role(on: "*") == .admin)
            return [own, granted].compactMap { $0 }.max()
        case .localAdmin: return .admin
        }
    }

    /// Finds a database's `_security` object (set by the daemon over its registry).
    public func setSecurityLookup(_ lookup: @escaping @Sendable (String) -> SecurityObject?) {
        securityLookup.withLock { $0 = lookup }
    }

    private let securityLookup = Mutex<(@Sendable (String) -> SecurityObject?)?>(nil)

    /// Every stored user, by name (the `_users` database's documents).
    public var users: [String: UserRecord] { storedUsers() }

    /// Whether users can be changed (`_users` writes): only with a users file.
    public var usersAreEditable: Bool { store != nil }

    /// Changes the stored users: writes the users file, then serves the result at once.
    public func updateUsers(_ change: (inout [String: UserRecord]) throws(UserStore.Failure) -> Void) throws(UserStore.Failure) {
        guard let store else { throw .io("the users are fixed by --user; there is no users file to change") }
        var updated: [String: UserRecord] = [:]
        try store.update { (users) throws(UserStore.Failure) in
            try change(&users)
            updated = users
        }
        let modified = Self.modified(store.path)
        state.withLock { s in
            s.users = updated
            s.modified = modified
        }
    }

    /// Hashes a new password on the password pool (it costs what a check costs).
    public func hashPassword(_ password: String) async throws(RESTError) -> PasswordHash {
        let result: Result<PasswordHash, PasswordHash.Malformed>
        do { result = try await checks.run { Result { () throws(PasswordHash.Malformed) in try PasswordHash(password: password) } } } catch {
            throw RESTError(503, "service_unavailable", "too many password checks are waiting; retry in a moment", retryAfter: 1)
        }
        switch result {
        case .success(let h): return h
        case .failure(let e): throw RESTError(500, "error", e.reason)
        }
    }

    /// The token that makes its bearer a server admin (`DaemonEndpoint`); nil = none accepted.
    public func setLocalToken(_ token: String?) { localToken.withLock { $0 = token } }

    private let localToken = Mutex<String?>(nil)

    /// Compares without leaking where they differ (OpenSSL's `CRYPTO_memcmp`, as `PasswordHash`).
    private static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    /// Whether the identity administers the server (admin of `*`): creates and deletes
    /// databases, reads metrics.
    public func isServerAdmin(_ identity: Identity) -> Bool { role(of: identity, on: "*") == .admin }

    /// Lets the members of a discovery group in (`DiscoveryGroup`): user `_group.NAME` with
    /// the password derived from the group's secret is a writer of every database. The name
    /// cannot clash with a stored user's (`UserRecord.isValidName` allows `_group.`, so the
    /// group's entry wins; `ferry user add` refuses the prefix).
    public func setGroup(_ group: DiscoveryGroup?) {
        let record = group.flatMap { g in
            g.password.flatMap { p in (try? PasswordHash(password: p, iterations: 10_000)).map { UserRecord(name: g.userName, password: $0, roles: ["*": .writer]) } }
        }
        groupUser.withLock { $0 = record }
    }

    private let groupUser = Mutex<UserRecord?>(nil)

    private func currentUsers() -> [String: UserRecord] {
        var users = storedUsers()
        if let g = groupUser.withLock({ $0 }) { users[g.name] = g }
        return users
    }

    private func storedUsers() -> [String: UserRecord] {
        guard let store else { return state.withLock { $0.users } }
        let now = ContinuousClock.now
        let (due, users) = state.withLock { s -> (Bool, [String: UserRecord]) in
            guard now - s.lastCheck >= .seconds(1) else { return (false, s.users) }
            s.lastCheck = now
            return (true, s.users)
        }
        guard due else { return users }
        if let modified = Self.modified(store.path), modified != state.withLock({ $0.modified }),
           let users = try? store.load() {
            state.withLock { s in
                s.users = users
                s.modified = modified
            }
        }
        return state.withLock { $0.users }
    }

    private static func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    /// The user and password of a `Basic` authorization value.
    static func basicCredentials(_ value: String) -> (String, String)? {
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let data = Data(base64Encoded: String(parts[1]).trimmingASCIIWhitespace()),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { b in _ = SHA256(b.baseAddress, b.count, &out) }
        return Hex.encode(out)
    }

}
