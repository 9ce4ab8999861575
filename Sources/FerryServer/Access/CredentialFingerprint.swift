/// A 128-bit keyed digest of an `Authorization` field exactly as sent: the key of the
/// verified-credential cache's fast path, so a client that sends the same Basic credentials
/// on every request is recognised without decoding base64 or running SHA-256 (together a
/// tenth of a GET's CPU).
///
/// Two SipHash runs (Swift's `Hasher`) salted with two random 64-bit values made once per
/// process: the value tells nothing about the password, and a client cannot aim one field at
/// another's digest without the salts. The field itself is never kept.
struct CredentialFingerprint: Hashable, Sendable {
    let first: UInt64
    let second: UInt64

    private static let salts = (UInt64.random(in: .min ... .max), UInt64.random(in: .min ... .max))

    /// The digest of `field`'s bytes.
    init(_ field: String) {
        var field = field
        (first, second) = field.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            var a = Hasher()
            a.combine(Self.salts.0)
            a.combine(bytes: raw)
            var b = Hasher()
            b.combine(Self.salts.1)
            b.combine(bytes: raw)
            return (UInt64(bitPattern: Int64(a.finalize())), UInt64(bitPattern: Int64(b.finalize())))
        }
    }
}
