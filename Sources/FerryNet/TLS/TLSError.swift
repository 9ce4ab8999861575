/// Why a TLS handshake or session failed. Each case closes only the connection it happened on.
public enum TLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A certificate, key or CA bundle could not be loaded, or the options contradict each other.
    case configuration(String)
    /// We refused the peer's certificate (expired, wrong host, untrusted, pin mismatch, missing).
    case certificateRejected(CertificateRejection)
    /// The peer refused the handshake or the session with this TLS alert (for example
    /// "certificate required" when a server wants a client certificate we did not present).
    case alertReceived(String)
    /// The handshake broke down on our side: garbage instead of TLS, no common version or
    /// cipher, a malformed message.
    case handshakeFailed(String)
    /// The handshake did not finish within its timeout.
    case handshakeTimedOut
    /// A record after the handshake was malformed or failed its integrity check.
    case protocolError(String)
    /// The TCP stream ended without a `close_notify` (possibly mid-record): the data may have
    /// been truncated by an attacker or a crash, so it is not an orderly end.
    case unexpectedEOF

    public var description: String {
        switch self {
        case .configuration(let s): return "TLS configuration: \(s)"
        case .certificateRejected(let r): return "TLS certificate rejected: \(r)"
        case .alertReceived(let s): return "TLS alert from the peer: \(s)"
        case .handshakeFailed(let s): return "TLS handshake failed: \(s)"
        case .handshakeTimedOut: return "TLS handshake timed out"
        case .protocolError(let s): return "TLS protocol error: \(s)"
        case .unexpectedEOF: return "TLS stream ended without close_notify"
        }
    }
}

/// Why we refused a peer's certificate.
public struct CertificateRejection: Sendable, Equatable, CustomStringConvertible {
    /// The broad reason, for code to branch on.
    public enum Reason: Sendable, Equatable {
        /// Past its `notAfter` date.
        case expired
        /// Before its `notBefore` date.
        case notYetValid
        /// Valid, but not for the host name (or IP address) we connected to.
        case hostnameMismatch
        /// Self-signed, or not issued by an authority we trust.
        case untrusted
        /// It matches none of the configured pins.
        case pinMismatch
        /// The peer presented no certificate although one is required.
        case missing
        /// Any other verification failure (see `detail`).
        case other
    }

    /// The broad reason.
    public var reason: Reason
    /// OpenSSL's explanation (or ours, for pins).
    public var detail: String

    /// Creates a rejection.
    public init(_ reason: Reason, detail: String) { self.reason = reason; self.detail = detail }

    public var description: String { "\(reason): \(detail)" }
}
