// The handshake's head and field types are FerryHTTP's (one set for every HTTP Ferry speaks);
// they are part of this module's API (`UpgradeRequest.head`, `UpgradeDecision`'s headers), so
// a user of the WebSocket layer gets them with it.
@_exported import FerryHTTP
import FerryNet

/// What a server's upgrade hook sees: the request, the offered subprotocols, the peer.
public struct UpgradeRequest: Sendable {
    /// The HTTP request head.
    public let head: HTTPRequestHead
    /// The subprotocols the client offered, in its order of preference.
    public let offeredSubprotocols: [String]
    /// The peer's address.
    public let remoteAddress: SocketAddress?
    /// The client's certificate, when the connection runs TLS and the client presented one
    /// (mutual TLS): authorise by its `commonName` or digest.
    public var peerCertificate: TLSCertificate? = nil
    /// Whether the connection runs TLS.
    public var isSecure = false

    /// The request path, without the query.
    public var path: String { head.path }
    /// The request headers.
    public var headers: HTTPHeaders { head.fields }

    /// The first client-offered subprotocol that is in `supported` (client preference wins,
    /// as Couchbase's go-blip and most servers choose).
    public func negotiateSubprotocol(_ supported: [String]) -> String? {
        offeredSubprotocols.first { supported.contains($0) }
    }
}

/// A server's answer to an upgrade request, at loop level.
public enum UpgradeDecision {
    /// Accept: answer 101 with this subprotocol and extra headers; `handler` receives the
    /// connection's events.
    case accept(subprotocol: String?, headers: HTTPHeaders = HTTPHeaders(), handler: WebSocketHandler)
    /// Refuse with an HTTP status (e.g. 401 with `WWW-Authenticate`, 404 for an unknown path).
    case refuse(status: Int, message: String, headers: HTTPHeaders = HTTPHeaders())
    /// Decide later, without holding the loop (a password check costs a PBKDF2 run): `start`
    /// runs on the loop with a function that takes the decision, which must be called once,
    /// on the same loop. The handshake timeout still applies while it waits; a decision that
    /// comes after the connection closed or timed out is dropped.
    case deferred((_ decide: @escaping (UpgradeDecision) -> Void) -> Void)
}
