import COpenSSL
import FerryHTTP
import FoundationEssentials

/// CouchDB's `AuthSession` cookie (Protocol/rest.md, "Sessions"): the base64url (no padding)
/// of `NAME:TIMESTAMP:MAC`, where TIMESTAMP is the login time in seconds since 1970 as
/// uppercase hex and MAC the raw 32 bytes of HMAC-SHA256 over `NAME:TIMESTAMP`. As CouchDB
/// keys it with the server secret and the user's password salt, Ferry keys it with the
/// server secret and the user's stored password hash: a password change ends every session.
/// A cookie is valid for `timeout` seconds after its timestamp; one past a tenth of that is
/// renewed (a fresh cookie on the response), as CouchDB does.
public struct SessionCookie: Sendable, Equatable {
    /// The cookie's name.
    public static let name = "AuthSession"

    /// The user it logs in.
    public let user: String
    /// When it was issued, in seconds since 1970.
    public let timestamp: Int64
    /// The MAC as carried.
    let mac: [UInt8]

    /// What a `Cookie` field's `AuthSession` value turned out to be.
    public enum Parsed: Sendable, Equatable {
        /// No `AuthSession` cookie, or an empty one (what a logout leaves).
        case absent
        /// Not base64url, or not three `:`-separated parts: CouchDB answers 400.
        case malformed
        /// A cookie to verify.
        case cookie(SessionCookie)
    }

    /// Issues a cookie for `user` at `timestamp`, signed with `key` (`key(secret:passwordHash:)`).
    public init(user: String, timestamp: Int64, key: [UInt8]) {
        self.user = user
        self.timestamp = timestamp
        mac = Self.hmac(key: key, message: Array("\(user):\(Self.hexTimestamp(timestamp))".utf8))
    }

    init(user: String, timestamp: Int64, mac: [UInt8]) {
        self.user = user
        self.timestamp = timestamp
        self.mac = mac
    }

    /// The cookie's value (what follows `AuthSession=`).
    public var value: String {
        let bytes = Array("\(user):\(Self.hexTimestamp(timestamp)):".utf8) + mac
        return Data(bytes).base64EncodedString()
            .replacing("+", with: "-").replacing("/", with: "_")
            .replacing("=", with: "")
    }

    /// The signing key for a user: the server secret followed by the user's encoded password
    /// hash (salt and derived key), so the cookie dies with the password.
    public static func key(secret: [UInt8], passwordHash: PasswordHash) -> [UInt8] {
        secret + Array(passwordHash.encoded.utf8)
    }

    /// Whether the MAC is the one `key` gives (compared in constant time).
    public func isSigned(with key: [UInt8]) -> Bool {
        let expected = Self.hmac(key: key, message: Array("\(user):\(Self.hexTimestamp(timestamp))".utf8))
        return expected.count == mac.count
            && expected.withUnsafeBytes { a in mac.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 } }
    }

    /// Seconds left at `now` (negative once expired).
    public func secondsLeft(now: Int64, timeout: Int64) -> Int64 { timestamp + timeout - now }

    /// Whether a valid cookie should be replaced by a fresh one: more than a tenth of its
    /// timeout has passed (CouchDB's rule: time left below 90 % of the timeout).
    public func needsRenewal(now: Int64, timeout: Int64) -> Bool {
        Double(secondsLeft(now: now, timeout: timeout)) < Double(timeout) * 0.9
    }

    /// Finds and reads the `AuthSession` cookie of a `Cookie` field.
    public static func parse(cookieHeader: String?) -> Parsed {
        guard let cookieHeader else { return .absent }
        var raw: Substring?
        for pair in cookieHeader.split(separator: ";") {
            let trimmed = pair.drop { $0 == " " || $0 == "\t" }
            guard let eq = trimmed.firstIndex(of: "="), trimmed[..<eq] == name else { continue }
            raw = trimmed[trimmed.index(after: eq)...]
        }
        guard var text = raw.map({ String($0).trimmingASCIIWhitespace() }), !text.isEmpty else { return .absent }
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = String(text.dropFirst().dropLast()) }
        var b64 = text.replacing("-", with: "+").replacing("_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64) else { return .malformed }
        let bytes = Array(data)
        // NAME:HEX:MAC — the MAC is raw bytes and may hold a colon itself, so only the
        // first two split.
        guard let first = bytes.firstIndex(of: UInt8(ascii: ":")),
              let second = bytes[(first + 1)...].firstIndex(of: UInt8(ascii: ":")) else { return .malformed }
        guard let user = String(validating: bytes[..<first], as: UTF8.self),
              let hex = String(validating: bytes[(first + 1)..<second], as: UTF8.self) else { return .malformed }
        // A timestamp that is not hex cannot have been issued: a cookie that fails to verify,
        // as CouchDB treats it (anonymous), not a malformed one.
        let timestamp = Int64(hex, radix: 16) ?? -1
        return .cookie(SessionCookie(user: user, timestamp: timestamp, mac: Array(bytes[(second + 1)...])))
    }

    /// The cookie's `SameSite` attribute (CouchDB's `[chttpd_auth] same_site`).
    public enum SameSite: String, Sendable, CaseIterable {
        /// Sent on same-site requests and top-level navigations: not on another site's
        /// fetches or form posts (cross-site request forgery).
        case lax
        /// Sent on same-site requests only.
        case strict
        /// Sent on every request (browsers require `Secure` with it: HTTPS).
        case none
        /// No attribute, as CouchDB by default (browsers then treat it as `lax`, mostly).
        case unset

        /// The attribute's value, nil for `unset`.
        var attribute: String? {
            switch self {
            case .lax: return "Lax"
            case .strict: return "Strict"
            case .none: return "None"
            case .unset: return nil
            }
        }
    }

    /// The `Set-Cookie` value carrying `value` (empty to clear it), with CouchDB's
    /// attributes: `Version=1; Expires=…; Max-Age=…; Path=/; HttpOnly` (and `Secure` over TLS,
    /// where a browser must not send it in clear), then `SameSite`.
    public static func setCookie(_ value: String, now: Int64, timeout: Int64, secure: Bool = false,
                                 sameSite: SameSite = .lax) -> String {
        var s = "\(name)=\(value); Version=1; Expires=\(expires(now + timeout)); Max-Age=\(timeout); Path=/; HttpOnly"
        if secure { s += "; Secure" }
        if let attribute = sameSite.attribute { s += "; SameSite=\(attribute)" }
        return s
    }

    /// An `Expires` date as CouchDB (mochiweb) writes it: `Sat, 28-Nov-2026 18:48:33 GMT`.
    static func expires(_ seconds: Int64) -> String {
        HTTPDate.format(secondsSince1970: Int(seconds), dateSeparator: "-")
    }

    static func hexTimestamp(_ t: Int64) -> String { String(t, radix: 16, uppercase: true) }

    static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        _ = key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count, &out, &length)
            }
        }
        return out
    }
}
