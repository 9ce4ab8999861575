import FerryNet

/// Why a WebSocket handshake or connection failed. Each case maps to the close code or HTTP
/// status Ferry sends for it.
public enum WebSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer broke RFC 6455 framing (close code 1002); the string says how.
    case protocolError(String)
    /// A text message or close reason was not valid UTF-8 (close code 1007).
    case invalidUTF8
    /// A permessage-deflate message did not inflate: invalid or truncated DEFLATE data
    /// (close code 1007, invalid payload data; RFC 7692 only says to fail the connection).
    case invalidCompressedData(String)
    /// A frame or message exceeded the configured limit (close code 1009); for compressed
    /// messages the limit applies to the inflated size.
    case messageTooBig(limit: Int)
    /// The HTTP upgrade request was refused or malformed; `status` is the HTTP status sent.
    case badHandshake(status: Int, reason: String)
    /// The server answered the client's upgrade with something other than 101.
    case upgradeRejected(status: Int, reason: String, headers: [HTTPHeader])
    /// The server's 101 response was not a valid WebSocket acceptance.
    case invalidUpgradeResponse(String)
    /// The HTTP head exceeded the configured maximum size (431 on the server side).
    case headerTooLarge(limit: Int)
    /// The handshake did not complete in time (slowloris guard) or a pong did not arrive.
    case timedOut
    /// The connection is closed; the code and reason are the ones received or sent.
    case closed(code: CloseCode, reason: String)
    /// The transport failed.
    case transport(NetError)
    /// The URL was not a usable `ws://` URL.
    case invalidURL(String)

    /// The close code sent to the peer when this error ends a connection.
    public var closeCode: CloseCode {
        switch self {
        case .protocolError: return .protocolError
        case .invalidUTF8, .invalidCompressedData: return .invalidFramePayloadData
        case .messageTooBig: return .messageTooBig
        case .closed(let code, _): return code
        case .timedOut: return .policyViolation
        default: return .internalError
        }
    }

    public var description: String {
        switch self {
        case .protocolError(let s): return "protocol error: \(s)"
        case .invalidUTF8: return "invalid UTF-8 in text payload"
        case .invalidCompressedData(let s): return "invalid compressed data: \(s)"
        case .messageTooBig(let l): return "message exceeds the limit of \(l) bytes"
        case let .badHandshake(status, reason): return "bad handshake (HTTP \(status)): \(reason)"
        case let .upgradeRejected(status, reason, _): return "upgrade rejected: HTTP \(status) \(reason)"
        case .invalidUpgradeResponse(let s): return "invalid upgrade response: \(s)"
        case .headerTooLarge(let l): return "HTTP head exceeds \(l) bytes"
        case .timedOut: return "timed out"
        case let .closed(code, reason): return "closed (\(code)\(reason.isEmpty ? "" : ": \(reason)"))"
        case .transport(let e): return "transport: \(e)"
        case .invalidURL(let s): return "invalid URL: \(s)"
        }
    }
}
