import COpenSSL
import FerryNet
import Foundation
import Synchronization

/// Who may do what on a daemon (Protocol/rest.md, "Access control"): authenticates a request
/// (HTTP Basic against the users file, or a TLS client certificate mapped to a user) and
/// gives the identity's role on a database. The same decision serves REST and BLIP.
///
/// Password checks cost a full PBKDF2 run (about 0.2 s at 600,000 iterations), so a
/// successful check is remembered — keyed by the user and a SHA-256 of the password, and only
/// while the user's stored hash is unchanged — and a keep-alive client or a replicator's
/// reconnects pay it once. The users file is re-read when it changes on disk (checked at most
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
        /// The defaults: no anonymous access.
        public init() {}
    }

    private struct State {
        var users: [String: UserRecord]
        var modified: Date?
        var lastCheck = ContinuousClock.now
        /// sha256(Authorization value) → the user and the hash the password was verified
        /// against (the entry holds only while the user's stored hash is that one).
        var verified: [String: (user: String, hash: PasswordHash)] = [:]
    }

    private let store: UserStore?
    private let state: Mutex<State>
    /// The policy for anonymous requests.
    public let policy: Policy

    /// Access from the users file at `store` (re-read when it changes).
    public init(store: UserStore, policy: Policy) throws(UserStore.Failure) {
        self.store = store
        self.policy = policy
        state = Mutex(State(users: try store.load(), modified: Self.modified(store.path)))
    }

    /// Access for a fixed set of users (the `--user`/`--password` flags of a one-file peer).
    public init(users: [UserRecord], policy: Policy) {
        store = nil
        self.policy = policy
        state = Mutex(State(users: Dictionary(users.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })))
    }

    /// Whether any user exists (else only anonymous access, if allowed, gets in).
    public var hasUsers: Bool { currentUsers().isEmpty == false }

    /// Authenticates a request from its `Authorization` field and TLS client certificate.
    /// Wrong credentials are refused even when anonymous access is on.
    public func authenticate(authorization: String?, certificate: TLSCertificate?) -> Result<Identity, RESTError> {
        let users = currentUsers()
        if let authorization, authorization.hasPrefix("Bearer ") {
            guard let token = localToken.withLock({ $0 }), Self.constantTimeEqual(Array(authorization.utf8.dropFirst(7)), Array(token.utf8)) else {
                return .failure(.unauthorized("the bearer token is not this daemon's"))
            }
            return .success(.localAdmin)
        }
        if let authorization {
            // The cache is keyed by a digest of the whole field, so a repeated request costs
            // one SHA-256 and no decoding; the password itself is never kept.
            let key = Self.sha256Hex(Array(authorization.utf8))
            if let hit = state.withLock({ $0.verified[key] }), users[hit.user]?.password == hit.hash {
                return .success(.user(hit.user))
            }
            guard let (name, password) = Self.basicCredentials(authorization) else {
                return .failure(.unauthorized("only HTTP Basic authentication is supported"))
            }
            guard let user = users[name], let hash = user.password else { return .failure(.unauthorized()) }
            guard hash.matches(password) else { return .failure(.unauthorized()) }
            state.withLock { s in
                if s.verified.count > 10_000 { s.verified.removeAll() }
                s.verified[key] = (name, hash)
            }
            return .success(.user(name))
        }
        if let certificate {
            let digest = "sha256:" + Self.hex(certificate.sha256)
            let cn = certificate.commonName.map { "cn:" + $0 }
            if let user = users.values.first(where: { $0.certificates.contains(digest) || (cn != nil && $0.certificates.contains(cn!)) }) {
                return .success(.user(user.name))
            }
        }
        guard policy.allowAnonymous else { return .failure(.unauthorized("Authentication required.")) }
        return .success(.anonymous)
    }

    /// The identity's role on database `db`; nil = no access.
    public func role(of identity: Identity, on db: String) -> Role? {
        switch identity {
        case .anonymous: return policy.allowAnonymous ? policy.anonymousRole : nil
        case .user(let name): return currentUsers()[name]?.role(on: db)
        case .localAdmin: return .admin
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
              let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { b in _ = SHA256(b.baseAddress, b.count, &out) }
        return hex(out)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
