import FerryWebSocket

/// Why a BLIP connection or request failed.
public enum BLIPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer broke BLIP framing (bad varint, CRC, deflate, message number, properties):
    /// fatal, the connection closes with WebSocket code 1011.
    case protocolError(String)
    /// The peer answered with an error response.
    case errorResponse(domain: String, code: Int, message: String)
    /// The connection closed before the response arrived.
    case disconnected(String)
    /// The WebSocket layer failed.
    case webSocket(WebSocketError)
    /// The request could not be sent (e.g. a response to a NoReply request).
    case invalidRequest(String)
    /// A streamed body was abandoned before its end (its producer failed or was dropped).
    /// BLIP 3 cannot cancel one message, so the connection closed (1011) rather than let the
    /// peer take a truncated body for a whole one.
    case aborted(String)

    public var description: String {
        switch self {
        case .protocolError(let s): return "BLIP protocol error: \(s)"
        case let .errorResponse(domain, code, message): return "BLIP error \(domain)/\(code): \(message)"
        case .disconnected(let s): return "disconnected: \(s)"
        case .webSocket(let e): return "WebSocket: \(e)"
        case .invalidRequest(let s): return "invalid request: \(s)"
        case .aborted(let s): return "streamed body aborted: \(s)"
        }
    }
}
