import FerryNet

/// Why an `HTTPClient` request failed. An HTTP status is not an error: the response is
/// returned whatever its status.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not an `http://` or `https://` URL.
    case invalidURL(String)
    /// The connection could not be made or failed (refused, reset, unresolvable, TLS).
    case transport(NetError)
    /// No byte of the response arrived within the timeout.
    case timedOut
    /// The server closed the connection before answering.
    case closedBeforeResponse
    /// The response broke HTTP (malformed, cut short, or over a limit).
    case malformedResponse(HTTPError)
    /// The body inflates past the limit, or is not gzip data though it says so.
    case badContentEncoding(String)
    /// The request was cancelled.
    case cancelled

    /// Whether trying the same request again later may succeed (the network, not the request).
    public var isTransient: Bool {
        switch self {
        case .transport(.tls), .invalidURL, .malformedResponse, .badContentEncoding, .cancelled: return false
        case .transport, .timedOut, .closedBeforeResponse: return true
        }
    }

    public var description: String {
        switch self {
        case .invalidURL(let u): return "not an http:// or https:// URL: \(u)"
        case .transport(let e): return e.description
        case .timedOut: return "timed out waiting for the response"
        case .closedBeforeResponse: return "the server closed the connection before answering"
        case .malformedResponse(let e): return "malformed response: \(e.reason)"
        case .badContentEncoding(let why): return "response body: \(why)"
        case .cancelled: return "cancelled"
        }
    }
}
