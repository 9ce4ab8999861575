/// How a TLS client verifies the server and (optionally) proves its own identity. TLS 1.2
/// and 1.3 only. The default verifies against the system trust store and checks the host name.
public struct TLSClientConfiguration: Sendable {
    /// Which server certificates are trusted.
    public var trust = TLSTrust.systemDefault
    /// When non-empty, the server's leaf certificate must also match one of these pins (after
    /// whatever `trust` checks); with `.pinnedCertificatesOnly` the pins are the only check.
    public var pins: [CertificatePin] = []
    /// Whether the certificate must be valid for the host connected to (DNS name or IP
    /// address). Default true; ignored by `.pinnedCertificatesOnly` and
    /// `.insecureAcceptAnyCertificate`.
    public var verifyHostname = true
    /// A client certificate for servers that require mutual TLS.
    public var identity: TLSIdentity?
    /// Seconds allowed for the TLS handshake. Default 10.
    public var handshakeTimeout = 10.0

    /// The defaults: system trust store, host name checked, no client certificate.
    public init() {}

    /// A configuration trusting `trust`.
    public init(trust: TLSTrust, pins: [CertificatePin] = [], identity: TLSIdentity? = nil) {
        self.trust = trust
        self.pins = pins
        self.identity = identity
    }
}

/// Which server certificates a client trusts.
public enum TLSTrust: Sendable, Hashable {
    /// The operating system's trust store (OpenSSL's default paths).
    case systemDefault
    /// Only these certificate authorities (a PEM bundle), not the system store.
    case certificateAuthorities(PEMSource)
    /// Only the configured pins: the chain and host name are not checked, but the leaf must
    /// match a pin. The usual peer-to-peer setup with self-signed certificates (what Couchbase
    /// Lite calls a pinned server certificate).
    case pinnedCertificatesOnly
    /// Any certificate at all, unverified. For throwaway test setups only: it gives no
    /// protection against a man in the middle. Never the default.
    case insecureAcceptAnyCertificate
}
