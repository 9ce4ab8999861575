/// How a TLS listener presents itself and (optionally) authenticates clients. TLS 1.2 and 1.3
/// only. A value type: make a `TLSContext` from it once and share that between listeners.
public struct TLSServerConfiguration: Sendable {
    /// Whether and how clients must present certificates (mutual TLS).
    public enum ClientAuthentication: Sendable, Hashable {
        /// No client certificate is asked for.
        case none
        /// A certificate is asked for and, when presented, must chain to `trusting`;
        /// clients without one are let in (the application decides from the peer certificate).
        case optional(trusting: PEMSource)
        /// A certificate chaining to `trusting` is required; the handshake fails without one.
        case required(trusting: PEMSource)
    }

    /// The server's certificate chain and key.
    public var identity: TLSIdentity
    /// Client certificates: none by default.
    public var clientAuthentication = ClientAuthentication.none
    /// Seconds allowed for the TLS handshake before the connection is closed. Default 10.
    public var handshakeTimeout = 10.0

    /// Creates a configuration for `identity`.
    public init(identity: TLSIdentity) { self.identity = identity }

    /// Creates a configuration from a certificate chain and a key.
    public init(certificateChain: PEMSource, privateKey: PEMSource) {
        identity = TLSIdentity(certificateChain: certificateChain, privateKey: privateKey)
    }
}
