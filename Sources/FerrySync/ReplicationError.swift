import FerryBLIP
import FerryStore
import FerryNet
import FerryWebSocket

/// Why a replication, or one document in it, failed. `isTransient` says whether the replicator
/// retries (Couchbase Lite's transient set, Protocol/replication.md, "Retries and transient errors").
public enum ReplicationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The target is not a `ws://host:port/db` URL.
    case invalidURL(String)
    /// The peer refused the upgrade with an HTTP status (401 = credentials missing or wrong).
    case httpStatus(Int, String)
    /// The connection could not be made or broke (refused, reset, 1006, missed heartbeat).
    case connection(String)
    /// The replicator stopped retrying a peer it could not reach: `attempts` attempts over
    /// `seconds` seconds (its `maxAttempts` or `maxOfflineTime`), the last failing with
    /// `reason` (that `.connection` failure's text). Typed so that a caller can say "gave up"
    /// without reading it out of a message.
    case gaveUp(attempts: Int, seconds: Int, reason: String)
    /// The peer sent something that is not the replication protocol (a typed reason).
    case protocolError(String)
    /// The peer answered a request with an error (`Error-Domain`, `Error-Code`, message).
    case remote(domain: String, code: Int, message: String)
    /// The local database refused or failed.
    case store(StoreError)
    /// The replicator was stopped.
    case stopped
    /// TLS failed: a certificate we refused (or the peer refused ours) is permanent; a
    /// handshake that timed out or a stream cut mid-record is retried.
    case tls(TLSError)

    /// Whether retrying may help: connection failures (a peer given up on too: it may be back
    /// later), HTTP 408/429/502/503/504, and a local database failure that may pass (disk
    /// full, I/O; `StoreError.isTransient`).
    public var isTransient: Bool {
        switch self {
        case .connection, .gaveUp: return true
        case .store(let e): return e.isTransient
        case .httpStatus(let s, _): return [408, 429, 502, 503, 504].contains(s)
        case .remote(_, let code, _): return [408, 429, 502, 503, 504].contains(code)
        case .tls(let e): return e == .handshakeTimedOut || e == .unexpectedEOF
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .invalidURL(let s): return "invalid replication URL \(s)"
        case .httpStatus(let s, let m): return "HTTP \(s)\(m.isEmpty ? "" : ": \(m)")"
        case .connection(let s): return "connection failed: \(s)"
        case let .gaveUp(attempts, seconds, reason): return "connection failed: gave up \(Self.attempts(attempts, in: seconds)): \(reason)"
        case .protocolError(let s): return "replication protocol error: \(s)"
        case let .remote(d, c, m): return "peer error \(d)/\(c): \(m)"
        case .store(let e): return "database: \(e)"
        case .stopped: return "stopped"
        case .tls(let e): return e.description
        }
    }

    /// `after 3 attempts in 2 s`: how long a peer was tried before it was given up on.
    public static func attempts(_ attempts: Int, in seconds: Int) -> String {
        "after \(attempts) attempt\(attempts == 1 ? "" : "s") in \(seconds) s"
    }

    /// An error from an untyped callback (a filter, a batch hook): kept if it is already one of
    /// ours or the store's, otherwise described.
    init(wrapping error: any Error) {
        if let e = error as? ReplicationError { self = e }
        else if let e = error as? StoreError { self = .store(e) }
        else { self = .protocolError("\(error)") }
    }

    /// Maps a BLIP failure: error responses keep their domain and code; a refused upgrade keeps
    /// its HTTP status; everything else on the wire is a (transient) connection failure.
    init(_ error: BLIPError) {
        switch error {
        case let .errorResponse(domain, code, message): self = .remote(domain: domain, code: code, message: message)
        case .protocolError(let s): self = .protocolError(s)
        case .invalidRequest(let s): self = .protocolError(s)
        case .disconnected(let s): self = .connection(s)
        case .aborted(let s): self = .connection("streamed body aborted: \(s)")   // the connection closed
        case .webSocket(let ws):
            if case let .upgradeRejected(status, reason, _) = ws { self = .httpStatus(status, reason) }
            else if case .invalidURL(let s) = ws { self = .invalidURL(s) }
            else if case .transport(.tls(let e)) = ws { self = .tls(e) }
            else { self = .connection("\(ws)") }
        }
    }
}
