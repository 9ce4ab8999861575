import COpenSSL

/// A certificate as the application sees it: the peer's, after a handshake (the upgrade hook
/// authorises by it), or one loaded to make a pin.
public struct TLSCertificate: Sendable, Hashable {
    /// The certificate, DER-encoded.
    public let der: [UInt8]
    /// The subject distinguished name, one line (RFC 2253 order), e.g. `CN=alice,O=Ferry`.
    public let subject: String
    /// The issuer distinguished name, one line.
    public let issuer: String
    /// The subject's common name, if it has one.
    public let commonName: String?
    /// SHA-256 of `der`.
    public let sha256: [UInt8]
    /// SHA-256 of the DER SubjectPublicKeyInfo.
    public let publicKeySHA256: [UInt8]

    /// Reads the fields of an OpenSSL certificate (not consumed).
    init?(_ x509: OpaquePointer) {
        guard let der = Self.encode(x509, i2d_X509) else { return nil }
        self.der = der
        subject = Self.oneLine(X509_get_subject_name(x509))
        issuer = Self.oneLine(X509_get_issuer_name(x509))
        commonName = Self.commonName(X509_get_subject_name(x509))
        sha256 = Self.sha256(der)
        guard let spki = Self.encode(X509_get_X509_PUBKEY(x509), i2d_X509_PUBKEY) else { return nil }
        publicKeySHA256 = Self.sha256(spki)
    }

    /// Parses the first certificate of a PEM text.
    public init(pem: String) throws(TLSError) {
        let x509 = try PEMLoader.certificates(.pem(pem)).first
        guard let x509 else { throw .configuration("no certificate in the PEM text") }
        defer { X509_free(x509) }
        guard let c = TLSCertificate(x509) else { throw .configuration("certificate cannot be encoded") }
        self = c
    }

    private static func encode(_ object: OpaquePointer?,
                               _ i2d: (OpaquePointer?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8]? {
        let n = i2d(object, nil)
        guard n > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(n))
        let written = out.withUnsafeMutableBufferPointer { buf -> Int32 in
            var p = buf.baseAddress
            return i2d(object, &p)
        }
        return written == n ? out : nil
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var md = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &md, &len, EVP_sha256(), nil)
        return md
    }

    private static func oneLine(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        _ = X509_NAME_print_ex(bio, name, 0, ferry_xn_flag_rfc2253())
        return PEMLoader.drain(bio)
    }

    private static func commonName(_ name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        let i = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard i >= 0, let entry = X509_NAME_get_entry(name, i), let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let n = ASN1_STRING_to_UTF8(&utf8, data)
        guard n >= 0, let utf8 else { return nil }
        defer { ferry_openssl_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(n)), as: UTF8.self)
    }
}
