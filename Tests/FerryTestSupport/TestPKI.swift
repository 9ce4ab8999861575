import COpenSSL
import Foundation

/// A certificate and its key, as PEM text and as files in the PKI's folder.
public struct TestIdentity: Sendable {
    /// The certificate (PEM).
    public let certificatePEM: String
    /// The private key (PEM, unencrypted).
    public let keyPEM: String
    /// Where the certificate is written.
    public let certificatePath: String
    /// Where the key is written.
    public let keyPath: String
}

/// A throwaway certificate authority made at test time with OpenSSL (EC P-256, SHA-256), so no
/// key is ever committed. It issues server and client certificates, including broken ones
/// (expired, wrong host) for the refusal tests; all files live in a temporary folder.
public final class TestPKI: Sendable {
    /// The folder holding every file.
    public let dir = TempDir()
    /// The authority itself.
    public let ca: TestIdentity
    private let caCert: Certificate
    private let caKey: Key

    /// OpenSSL objects freed on deinit. Safety of `@unchecked Sendable`: never mutated after
    /// creation; OpenSSL only reads them when signing, under the caller's sequencing.
    private final class Certificate: @unchecked Sendable {
        let x: OpaquePointer
        init(_ x: OpaquePointer) { self.x = x }
        deinit { X509_free(x) }
    }
    private final class Key: @unchecked Sendable {
        let k: OpaquePointer
        init(_ k: OpaquePointer) { self.k = k }
        deinit { EVP_PKEY_free(k) }
    }

    /// Makes the authority (`CN=Ferry Test CA`).
    public init(name: String = "Ferry Test CA") {
        let key = Key(Self.newKey())
        let cert = Certificate(Self.makeCertificate(commonName: name, key: key.k, issuer: nil, issuerKey: key.k,
                                                    notBefore: -3600, notAfter: 86_400 * 30,
                                                    extensions: [(NID_basic_constraints, "critical,CA:TRUE"),
                                                                 (NID_key_usage, "critical,keyCertSign,cRLSign")]))
        caKey = key
        caCert = cert
        ca = Self.write(cert.x, key.k, in: dir, name: "ca")
    }

    /// Issues a server certificate for `hosts` (DNS names and IP addresses), valid from
    /// `notBefore` to `notAfter` seconds from now (negative for the past).
    public func server(_ name: String = "server", hosts: [String] = ["localhost", "127.0.0.1"],
                       notBefore: Int = -3600, notAfter: Int = 86_400 * 7) -> TestIdentity {
        issue(name, commonName: hosts.first ?? name, hosts: hosts, usage: "serverAuth", notBefore: notBefore, notAfter: notAfter)
    }

    /// Issues a client certificate with common name `commonName` (the identity a server
    /// authorises by).
    public func client(_ commonName: String, notBefore: Int = -3600, notAfter: Int = 86_400 * 7) -> TestIdentity {
        issue("client-\(commonName)", commonName: commonName, hosts: [], usage: "clientAuth", notBefore: notBefore, notAfter: notAfter)
    }

    /// A self-signed server certificate (its own authority), as peer-to-peer setups use.
    public static func selfSigned(in dir: TempDir, name: String = "self", hosts: [String] = ["localhost", "127.0.0.1"]) -> TestIdentity {
        let key = newKey()
        defer { EVP_PKEY_free(key) }
        let cert = makeCertificate(commonName: hosts.first ?? name, key: key, issuer: nil, issuerKey: key,
                                   notBefore: -3600, notAfter: 86_400 * 7,
                                   extensions: [(NID_subject_alt_name, altNames(hosts))])
        defer { X509_free(cert) }
        return write(cert, key, in: dir, name: name)
    }

    private func issue(_ file: String, commonName: String, hosts: [String], usage: String,
                       notBefore: Int, notAfter: Int) -> TestIdentity {
        let key = Self.newKey()
        defer { EVP_PKEY_free(key) }
        var ext: [(Int32, String)] = [(NID_basic_constraints, "CA:FALSE"), (NID_ext_key_usage, usage)]
        if !hosts.isEmpty { ext.append((NID_subject_alt_name, Self.altNames(hosts))) }
        let cert = Self.makeCertificate(commonName: commonName, key: key, issuer: caCert.x, issuerKey: caKey.k,
                                        notBefore: notBefore, notAfter: notAfter, extensions: ext)
        defer { X509_free(cert) }
        return Self.write(cert, key, in: dir, name: file)
    }

    private static func altNames(_ hosts: [String]) -> String {
        hosts.map { $0.first?.isNumber == true || $0.contains(":") ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
    }

    private static func newKey() -> OpaquePointer {
        let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil)
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) == 1,
              EVP_PKEY_keygen(ctx, &key) == 1, let key else { fatalError("test key generation failed") }
        return key
    }

    private static func makeCertificate(commonName: String, key: OpaquePointer, issuer: OpaquePointer?, issuerKey: OpaquePointer,
                                        notBefore: Int, notAfter: Int, extensions: [(Int32, String)]) -> OpaquePointer {
        guard let x = X509_new() else { fatalError("X509_new") }
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), Int.random(in: 1...Int(Int32.max)))
        X509_gmtime_adj(X509_getm_notBefore(x), notBefore)
        X509_gmtime_adj(X509_getm_notAfter(x), notAfter)
        X509_set_pubkey(x, key)
        let name = X509_get_subject_name(x)
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "Ferry tests", -1, -1, 0)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(x, issuer.map { X509_get_subject_name($0) } ?? name)
        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer ?? x, x, nil, nil, 0)
        for (nid, value) in extensions + [(NID_subject_key_identifier, "hash")] {
            guard let ext = X509V3_EXT_conf_nid(nil, &ctx, nid, value) else { fatalError("extension \(value)") }
            X509_add_ext(x, ext, -1)
            X509_EXTENSION_free(ext)
        }
        guard X509_sign(x, issuerKey, EVP_sha256()) > 0 else { fatalError("X509_sign") }
        return x
    }

    private static func write(_ cert: OpaquePointer, _ key: OpaquePointer, in dir: TempDir, name: String) -> TestIdentity {
        let certPEM = pem { PEM_write_bio_X509($0, cert) }
        let keyPEM = pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
        let certPath = dir.path("\(name).pem"), keyPath = dir.path("\(name).key")
        FileManager.default.createFile(atPath: certPath, contents: Data(certPEM.utf8))
        FileManager.default.createFile(atPath: keyPath, contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600])
        return TestIdentity(certificatePEM: certPEM, keyPEM: keyPEM, certificatePath: certPath, keyPath: keyPath)
    }

    private static func pem(_ body: (OpaquePointer) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new") }
        defer { BIO_free(bio) }
        _ = body(bio)
        var p: UnsafeMutablePointer<CChar>?
        let n = ferry_bio_mem_data(bio, &p)
        guard n > 0, let p else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: n), as: UTF8.self)
    }
}
