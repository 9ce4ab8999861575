import COpenSSL
import FerryNet
import FerryStore

/// A discovery group (Protocol/dns-sd.md, "Groups and trust"): the peers that replicate with
/// each other when they find one another. Joining takes credentials — a shared secret, and
/// optionally pinned certificates — so discovery is never a way around authentication.
///
/// From the secret come two values, neither of which is the secret itself:
/// - the HTTP Basic password peers use with each other (user `_group.NAME`);
/// - a proof put in the advertisement, an HMAC over the advertiser's ID, port, certificate
///   pin, addresses and the time it was made: a host without the secret cannot make one, so
///   it is listed but never trusted (and never sent the password); one replayed from another
///   address or long after is not trusted either.
public struct DiscoveryGroup: Sendable, Equatable {
    /// The group's name (letters, digits, `.`, `_`, `-`; up to 63).
    public var name: String
    /// The shared secret, if the group uses one.
    public var secret: String?
    /// Certificate pins (SHA-256 of the DER certificate) of the members that serve TLS; when
    /// not empty, a member must serve TLS with one of these certificates.
    public var pins: [CertificatePin]

    /// A group; the secret is needed (`validate()`).
    public init(name: String, secret: String?, pins: [CertificatePin] = []) {
        self.name = name; self.secret = secret; self.pins = pins
    }

    /// Why a group cannot be joined as configured, if it cannot.
    public func validate() -> String? {
        if !Self.isValidName(name) { return "group name \"\(name)\" must be 1-63 letters, digits, '.', '_' or '-'" }
        // Members authenticate to each other with HTTP Basic derived from the secret; pins
        // add the requirement that members serve TLS with known certificates.
        if (secret ?? "").isEmpty { return "a group is joined only with credentials: give its shared secret" }
        return nil
    }

    /// Whether `name` can name a group.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 63 && name.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 46 || $0 == 95 || $0 == 45
        }
    }

    /// The user name members present to each other.
    public var userName: String { "_group." + name }

    /// The password members present to each other (hex HMAC-SHA256 of the secret), or nil
    /// without a secret.
    public var password: String? {
        secret.map { Self.hmacHex(key: $0, message: "ferry-group-password/v1|" + name) }
    }

    /// What a proof signs: the advertiser's ID, port, certificate pin, the addresses it
    /// serves on (sorted) and when it signed (seconds since 1970).
    public struct Claim: Sendable, Equatable {
        /// The advertiser's stable ID.
        public var peerID: String
        /// Its SRV port.
        public var port: Int
        /// Its certificate pin, if it serves TLS.
        public var pin: String?
        /// The addresses it serves on, as text.
        public var addresses: [String]
        /// When the proof was made, in seconds since 1970.
        public var timestamp: Int64

        /// A claim with these parts.
        public init(peerID: String, port: Int, pin: String?, addresses: [String], timestamp: Int64) {
            self.peerID = peerID; self.port = port; self.pin = pin; self.addresses = addresses; self.timestamp = timestamp
        }

        var message: String {
            "ferry-group-proof/v2|\(peerID)|\(port)|\(pin ?? "")|\(addresses.sorted().joined(separator: ","))|\(timestamp)"
        }
    }

    /// The proof an advertisement carries (32 hex digits) for `claim`; nil without a secret.
    public func proof(_ claim: Claim) -> String? {
        secret.map { String(Self.hmacHex(key: $0, message: "\(name)|" + claim.message).prefix(32)) }
    }

    /// Whether `proof` is the one this group's secret gives for `claim` (compared in
    /// constant time). Whether the claim is fresh and names the address the advertisement
    /// came from is `PeerRecord.distrust`'s to check.
    public func verify(proof: String?, _ claim: Claim) -> Bool {
        guard let expected = self.proof(claim), let proof else { return false }
        let a = Array(expected.utf8), b = Array(proof.lowercased().utf8)
        return a.count == b.count && a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    static func hmacHex(key: String, message: String) -> String {
        let k = Array(key.utf8), m = Array(message.utf8)
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        k.withUnsafeBytes { kb in
            m.withUnsafeBufferPointer { mb in
                _ = HMAC(EVP_sha256(), kb.baseAddress, Int32(kb.count), mb.baseAddress, mb.count, &out, &length)
            }
        }
        return Hex.encode(Array(out.prefix(Int(length))))
    }

    /// Whether two groups have the same name, secret and pins (in the same order).
    public static func == (a: DiscoveryGroup, b: DiscoveryGroup) -> Bool {
        a.name == b.name && a.secret == b.secret && a.pins == b.pins
    }
}
