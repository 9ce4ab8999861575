#if canImport(Glibc)
import Glibc
#endif

/// Why a socket, listener or event-loop operation failed.
public enum NetError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed; `operation` names it and `errno` says why.
    case system(operation: String, errno: Int32)
    /// The peer refused the connection (ECONNREFUSED).
    case connectionRefused
    /// The peer reset the connection (ECONNRESET / EPIPE).
    case connectionReset
    /// An operation did not finish within its deadline.
    case timedOut
    /// The host name could not be resolved.
    case resolutionFailed(host: String, reason: String)
    /// The connection or listener was already closed when the operation was attempted.
    case closed
    /// The event loop was shut down before the operation could complete.
    case loopShutDown
    /// An address string could not be parsed.
    case invalidAddress(String)
    /// The TLS layer failed (handshake, certificate, alert, truncation).
    case tls(TLSError)

    public var description: String {
        switch self {
        case let .system(op, e): return "\(op) failed: \(String(cString: strerror(e))) (errno \(e))"
        case .connectionRefused: return "connection refused"
        case .connectionReset: return "connection reset by peer"
        case .timedOut: return "timed out"
        case let .resolutionFailed(host, reason): return "cannot resolve \(host): \(reason)"
        case .closed: return "closed"
        case .loopShutDown: return "event loop shut down"
        case let .invalidAddress(s): return "invalid address \(s)"
        case let .tls(e): return e.description
        }
    }

    /// Maps an errno from a socket call to the most specific case.
    static func from(errno e: Int32, operation: String) -> NetError {
        switch e {
        case ECONNREFUSED: return .connectionRefused
        case ECONNRESET, EPIPE: return .connectionReset
        case ETIMEDOUT: return .timedOut
        default: return .system(operation: operation, errno: e)
        }
    }
}
