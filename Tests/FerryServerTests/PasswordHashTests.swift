import FerryServer
import Testing

@Suite("Stored passwords: PBKDF2-HMAC-SHA256, salted, never the password")
struct PasswordHashTests {
    @Test func theRFC7914VectorMatches() throws {
        // RFC 7914 §11: PBKDF2-HMAC-SHA256, P = "passwd", S = "salt", c = 1 (first 32 bytes).
        let known = try PasswordHash(encoded: "pbkdf2-sha256$1$73616c74$55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
        #expect(known.matches("passwd"))
        #expect(!known.matches("passwd "))
        #expect(!known.matches(""))
    }

    @Test func aNewHashIsSaltedAndRoundTrips() throws {
        let a = try PasswordHash(password: "secret", iterations: 1000)
        let b = try PasswordHash(password: "secret", iterations: 1000)
        #expect(a != b, "two hashes of one password differ by their salts")
        #expect(!a.encoded.contains("secret"))
        let read = try PasswordHash(encoded: a.encoded)
        #expect(read == a && read.matches("secret") && !read.matches("Secret"))
        #expect(PasswordHash.defaultIterations >= 600_000)
    }

    @Test(arguments: ["", "plain", "pbkdf2-sha256$0$00$00", "pbkdf2-sha256$10$zz$" + String(repeating: "0", count: 64),
                      "pbkdf2-sha256$10$00$00", "md5$1$00$" + String(repeating: "0", count: 64)])
    func malformedHashesAreRefused(_ encoded: String) {
        #expect(throws: PasswordHash.Malformed.self) { try PasswordHash(encoded: encoded) }
    }
}
