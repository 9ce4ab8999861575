import COpenSSL
import FerryStore

/// A password stored as PBKDF2-HMAC-SHA256 with a random salt, never as the password itself
/// (OWASP's Password Storage Cheat Sheet: PBKDF2-HMAC-SHA256 at 600,000 iterations). Encoded
/// as `pbkdf2-sha256$<iterations>$<salt hex>$<hash hex>`, so the cost can be raised later
/// without invalidating stored hashes.
public struct PasswordHash: Sendable, Equatable, CustomStringConvertible {
    /// The iterations new hashes use.
    public static let defaultIterations = 600_000
    /// Salt and derived-key length in bytes.
    static let saltLength = 16
    static let keyLength = 32
    static let scheme = "pbkdf2-sha256"

    /// The PBKDF2 iteration count.
    public let iterations: Int
    let salt: [UInt8]
    let hash: [UInt8]

    /// Why a stored hash could not be read.
    public struct Malformed: Error, Sendable, Equatable {
        /// What is wrong with it.
        public let reason: String
    }

    /// Hashes `password` with a fresh random salt.
    public init(password: String, iterations: Int = PasswordHash.defaultIterations) throws(Malformed) {
        guard iterations >= 1 else { throw Malformed(reason: "iterations must be positive") }
        var salt = [UInt8](repeating: 0, count: Self.saltLength)
        guard RAND_bytes(&salt, Int32(salt.count)) == 1 else { throw Malformed(reason: "no random bytes for a salt") }
        self.iterations = iterations
        self.salt = salt
        hash = try Self.derive(password, salt: salt, iterations: iterations)
    }

    /// Reads a hash in the encoded form.
    public init(encoded: String) throws(Malformed) {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == Self.scheme else { throw Malformed(reason: "not a \(Self.scheme) hash") }
        guard let n = Int(parts[1]), n >= 1, n <= 100_000_000 else { throw Malformed(reason: "bad iteration count") }
        guard let salt = Hex.decode(parts[2]), !salt.isEmpty, salt.count <= 64,
              let hash = Hex.decode(parts[3]), hash.count == Self.keyLength else { throw Malformed(reason: "bad salt or hash") }
        iterations = n
        self.salt = salt
        self.hash = hash
    }

    /// The encoded form, for storage.
    public var encoded: String { "\(Self.scheme)$\(iterations)$\(Hex.encode(salt))$\(Hex.encode(hash))" }

    public var description: String { "\(Self.scheme) (\(iterations) iterations)" }

    /// Whether `password` is the one hashed; the comparison takes the same time wherever the
    /// bytes differ.
    public func matches(_ password: String) -> Bool {
        guard let candidate = try? Self.derive(password, salt: salt, iterations: iterations) else { return false }
        return candidate.withUnsafeBytes { a in hash.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, Self.keyLength) == 0 } }
    }

    private static func derive(_ password: String, salt: [UInt8], iterations: Int) throws(Malformed) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: keyLength)
        let pass = Array(password.utf8)
        let ok = pass.withUnsafeBufferPointer { p in
            PKCS5_PBKDF2_HMAC(p.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(p.count),
                              salt, Int32(salt.count), Int32(iterations), EVP_sha256(), Int32(keyLength), &out)
        }
        guard ok == 1 else { throw Malformed(reason: "PBKDF2 failed") }
        return out
    }
}
