/// A pinned server certificate: the SHA-256 of the whole certificate (DER) or of its public
/// key (the DER SubjectPublicKeyInfo, which survives re-issuing with the same key, as in
/// HTTP public-key pinning).
public struct CertificatePin: Sendable, Hashable, CustomStringConvertible {
    /// What the digest covers.
    public enum Kind: Sendable, Hashable {
        /// The whole certificate, DER-encoded.
        case certificate
        /// The SubjectPublicKeyInfo, DER-encoded.
        case publicKey
    }

    /// What the digest covers.
    public var kind: Kind
    /// The 32-byte SHA-256 digest.
    public var sha256: [UInt8]

    /// Creates a pin from a raw digest.
    public init(_ kind: Kind, sha256: [UInt8]) {
        self.kind = kind
        self.sha256 = sha256
    }

    /// Parses a digest written as hex (colons allowed, as `openssl x509 -fingerprint` prints
    /// it). Nil unless it is exactly 32 bytes.
    public init?(_ kind: Kind, hex: String) {
        let digits = hex.filter { $0 != ":" && !$0.isWhitespace }
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        var it = digits.makeIterator()
        while let hi = it.next(), let lo = it.next() {
            guard let h = hi.hexDigitValue, let l = lo.hexDigitValue else { return nil }
            bytes.append(UInt8(h << 4 | l))
        }
        self.init(kind, sha256: bytes)
    }

    /// The pin that `certificate` satisfies.
    public init(_ kind: Kind, of certificate: TLSCertificate) {
        self.init(kind, sha256: kind == .certificate ? certificate.sha256 : certificate.publicKeySHA256)
    }

    /// Whether `certificate` matches this pin.
    public func matches(_ certificate: TLSCertificate) -> Bool {
        sha256 == (kind == .certificate ? certificate.sha256 : certificate.publicKeySHA256)
    }

    public var description: String {
        (kind == .certificate ? "cert-sha256:" : "spki-sha256:") + sha256.map { String(format2: $0) }.joined()
    }
}

extension String {
    /// Two lowercase hex digits.
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self.init([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }
}
