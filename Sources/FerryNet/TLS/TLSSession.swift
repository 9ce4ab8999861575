import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// The sans-I/O TLS state of one connection: ciphertext from the socket goes in with `feed`,
/// plaintext comes out of `read`; plaintext to send goes in with `write`, ciphertext for the
/// socket comes out of `takeOutput`. It knows nothing of sockets or loops (OpenSSL runs over
/// two memory BIOs), so tests drive two of them back to back. Not thread-safe: one owner.
public final class TLSSession {
    /// What `read` found.
    public enum ReadResult: Equatable {
        /// This many plaintext bytes were written into the buffer.
        case bytes(Int)
        /// Nothing decrypted until more ciphertext arrives.
        case wantMore
        /// The peer sent `close_notify`: no more data will come.
        case closed
    }

    private let ssl: OpaquePointer
    private let rbio: OpaquePointer
    private let wbio: OpaquePointer
    private let context: TLSContext
    private let hostName: String?
    /// True once the handshake (and, for clients, the pin check) has succeeded.
    public private(set) var handshakeComplete = false
    /// True once the peer's `close_notify` was read.
    public private(set) var receivedCloseNotify = false
    private var sentCloseNotify = false
    /// The peer's leaf certificate, once the handshake is complete (nil if it sent none).
    public private(set) var peerCertificate: TLSCertificate?

    /// A session for `context`'s role. `serverName` (clients) is sent as SNI when it is a DNS
    /// name and checked against the certificate unless the trust settings say otherwise.
    public init(context: TLSContext, serverName: String? = nil) throws(TLSError) {
        guard let ssl = SSL_new(context.ctx) else { throw .configuration("SSL_new: \(PEMLoader.takeErrors())") }
        guard let r = BIO_new(BIO_s_mem()), let w = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .configuration("out of memory")
        }
        // An empty input BIO means "wait for more", not end of stream.
        ferry_bio_set_mem_eof_return(r, -1)
        SSL_set_bio(ssl, r, w)
        self.ssl = ssl
        rbio = r
        wbio = w
        self.context = context
        hostName = serverName
        switch context.role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            if let name = serverName {
                let isIP = Self.isIPAddress(name)
                if !isIP { _ = ferry_ssl_set_sni(ssl, name) }
                if context.verifiesChain && context.client?.verifyHostname != false {
                    let ok = isIP ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) : SSL_set1_host(ssl, name)
                    if ok != 1 { SSL_free(ssl); throw .configuration("cannot check host \(name)") }
                }
            }
        }
    }

    deinit { SSL_free(ssl) }  // frees both BIOs too

    /// The negotiated protocol version ("TLSv1.3"), once the handshake is complete.
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }
    /// The negotiated cipher suite, once the handshake is complete.
    public var cipherSuite: String { SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)).map { String(cString: $0) } ?? "" }

    /// Hands received ciphertext to OpenSSL (copied).
    public func feed(_ ciphertext: UnsafeRawBufferPointer) {
        guard let base = ciphertext.baseAddress, ciphertext.count > 0 else { return }
        _ = BIO_write(rbio, base, Int32(ciphertext.count))
    }

    /// Runs the handshake as far as the input allows. Returns true once it is complete (and
    /// the peer's certificate passed the pins); throws the reason it failed. Any alert for the
    /// peer is left in the output.
    public func advanceHandshake() throws(TLSError) -> Bool {
        if handshakeComplete { return true }
        // SSL_get_error reads this thread's error queue: start clean, since other connections
        // of the loop share the thread.
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc != 1 {
            let e = SSL_get_error(ssl, rc)
            if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE { return false }
            throw failure(e)
        }
        if let x = SSL_get1_peer_certificate(ssl) {
            peerCertificate = TLSCertificate(x)
            X509_free(x)
        }
        try checkPins()
        handshakeComplete = true
        return true
    }

    private func checkPins() throws(TLSError) {
        guard let client = context.client, !client.pins.isEmpty else { return }
        guard let cert = peerCertificate else {
            throw .certificateRejected(CertificateRejection(.missing, detail: "the server presented no certificate"))
        }
        guard client.pins.contains(where: { $0.matches(cert) }) else {
            throw .certificateRejected(CertificateRejection(
                .pinMismatch, detail: "certificate \(CertificatePin(.certificate, of: cert)) (key \(CertificatePin(.publicKey, of: cert))) matches no pin"))
        }
    }

    /// Decrypts into `buffer`. Call until it returns `.wantMore` (or `.closed`).
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> ReadResult {
        guard let base = buffer.baseAddress else { return .wantMore }
        let n = SSL_read(ssl, base, Int32(min(buffer.count, Int(Int32.max))))
        if n > 0 { return .bytes(Int(n)) }
        let e = SSL_get_error(ssl, n)
        switch e {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantMore
        case SSL_ERROR_ZERO_RETURN:
            receivedCloseNotify = true
            return .closed
        default: throw failure(e)
        }
    }

    /// Whether OpenSSL holds decrypted-but-unread or buffered ciphertext bytes (after a pause
    /// the owner must read them: no socket event will announce them).
    public var hasBufferedInput: Bool { SSL_pending(ssl) > 0 || ferry_bio_pending(rbio) > 0 }

    /// Encrypts `plaintext` into the output. The output BIO grows as needed, so it always
    /// takes everything.
    public func write(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) {
        guard var p = plaintext.baseAddress else { return }
        var left = plaintext.count
        while left > 0 {
            let chunk = Int32(min(left, 1 << 30))
            let n = SSL_write(ssl, p, chunk)
            if n <= 0 { throw failure(SSL_get_error(ssl, n)) }
            p += Int(n)
            left -= Int(n)
        }
    }

    /// Queues our `close_notify` (once).
    public func shutdown() {
        guard !sentCloseNotify else { return }
        sentCloseNotify = true
        if SSL_shutdown(ssl) < 0 { ERR_clear_error() }
    }

    /// Ciphertext bytes waiting to be sent.
    public var outputByteCount: Int { ferry_bio_pending(wbio) }

    /// Hands the pending ciphertext to `body` (borrowed) and empties the output.
    public func takeOutput(_ body: (UnsafeRawBufferPointer) -> Void) {
        var p: UnsafeMutablePointer<CChar>?
        let n = ferry_bio_mem_data(wbio, &p)
        guard n > 0, let p else { return }
        body(UnsafeRawBufferPointer(start: p, count: n))
        _ = ferry_bio_reset(wbio)
    }

    /// Turns OpenSSL's error state into our typed error, and clears it.
    private func failure(_ sslError: Int32) -> TLSError {
        defer { ERR_clear_error() }
        let verify = SSL_get_verify_result(ssl)
        if verify != X509_V_OK && sslError == SSL_ERROR_SSL && context.verifiesChain {
            return .certificateRejected(Self.rejection(Int32(verify)))
        }
        let e = ERR_peek_last_error()
        let reason = ferry_err_reason(e)
        if sslError == SSL_ERROR_SYSCALL || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING { return .unexpectedEOF }
        if reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256 {
            return .alertReceived(Self.alertDescription(reason - SSL_AD_REASON_OFFSET))
        }
        if reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE {
            return .certificateRejected(CertificateRejection(.missing, detail: "the peer presented no certificate"))
        }
        let text = PEMLoader.takeErrors()
        return handshakeComplete ? .protocolError(text) : .handshakeFailed(text)
    }

    /// The name of a TLS alert; OpenSSL 3.0 does not name the TLS 1.3 additions.
    static func alertDescription(_ code: Int32) -> String {
        let name = String(cString: SSL_alert_desc_string_long(code))
        if name != "unknown" { return name }
        switch code {
        case 109: return "missing extension"
        case 115: return "unknown PSK identity"
        case 116: return "certificate required"
        case 120: return "no application protocol"
        default: return "alert \(code)"
        }
    }

    static func rejection(_ code: Int32) -> CertificateRejection {
        let detail = String(cString: X509_verify_cert_error_string(Int(code)))
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED: return CertificateRejection(.expired, detail: detail)
        case X509_V_ERR_CERT_NOT_YET_VALID: return CertificateRejection(.notYetValid, detail: detail)
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: return CertificateRejection(.hostnameMismatch, detail: detail)
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
             X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED:
            return CertificateRejection(.untrusted, detail: detail)
        default: return CertificateRejection(.other, detail: detail)
        }
    }

    static func isIPAddress(_ s: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, s, &v4) == 1 || inet_pton(AF_INET6, s, &v6) == 1
    }
}
