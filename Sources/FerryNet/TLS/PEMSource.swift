/// Where PEM text (certificates, a private key, a CA bundle) comes from.
public enum PEMSource: Sendable, Hashable {
    /// A file on disk, read when the TLS context is made.
    case file(String)
    /// PEM text held in memory.
    case pem(String)
}

/// A certificate chain (leaf first) and its private key: a server's identity, or a client's
/// for mutual TLS.
public struct TLSIdentity: Sendable, Hashable {
    /// The certificate chain, leaf first, in PEM.
    public var certificateChain: PEMSource
    /// The private key of the leaf certificate, in PEM (unencrypted).
    public var privateKey: PEMSource

    /// Creates an identity.
    public init(certificateChain: PEMSource, privateKey: PEMSource) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }
}
