import FoundationEssentials

/// A parsed `ws://` URL.
public struct WebSocketURL: Sendable, Equatable {
    /// The host (without brackets for IPv6).
    public var host: String
    /// The port (default 80).
    public var port: Int
    /// Path and query, at least `/`.
    public var target: String
    /// Whether the scheme was `wss` (TLS).
    public var secure: Bool

    /// Parses `ws://host[:port]/path?query`. Throws `.invalidURL` otherwise.
    public init(_ string: String) throws(WebSocketError) {
        guard let u = URLComponents(string: string), let scheme = u.scheme?.lowercased(),
              scheme == "ws" || scheme == "wss", let h = u.host, !h.isEmpty else {
            throw .invalidURL(string)
        }
        secure = scheme == "wss"
        host = h.hasPrefix("[") ? String(h.dropFirst().dropLast()) : h
        port = u.port ?? (secure ? 443 : 80)
        let path = u.percentEncodedPath.isEmpty ? "/" : u.percentEncodedPath
        target = u.percentEncodedQuery.map { path + "?" + $0 } ?? path
    }

    /// The `Host` header value: host, with the port unless it is the scheme's default.
    public var hostHeader: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? h : "\(h):\(port)"
    }
}
