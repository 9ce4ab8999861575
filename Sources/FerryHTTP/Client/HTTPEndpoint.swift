import FoundationEssentials

/// Where an HTTP client connects: scheme (plain or TLS), host and port. Requests to the same
/// endpoint share the client's pooled connections.
public struct HTTPEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Whether the connection runs TLS (`https`).
    public var secure: Bool
    /// The host name or address literal (an IPv6 literal without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int

    /// An endpoint with these parts.
    public init(secure: Bool, host: String, port: Int) {
        self.secure = secure
        self.host = host
        self.port = port
    }

    /// The value of the `Host` field: the port is left out when it is the scheme's default.
    public var hostHeader: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? h : "\(h):\(port)"
    }

    /// `http://host:port` or `https://host:port`.
    public var description: String { (secure ? "https://" : "http://") + hostHeader }

    /// The endpoint and request target (path and query, percent-encoding kept) of an
    /// `http://` or `https://` URL, and the user information it carries, percent-decoded.
    public static func split(_ url: String) -> (endpoint: HTTPEndpoint, target: String, user: String?, password: String?)? {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = c.host, !host.isEmpty else { return nil }
        let secure = scheme == "https"
        var target = c.percentEncodedPath.isEmpty ? "/" : c.percentEncodedPath
        if let q = c.percentEncodedQuery { target += "?" + q }
        let user = c.user.map { PercentEncoding.decode($0) ?? $0 }
        let password = c.password.map { PercentEncoding.decode($0) ?? $0 }
        return (HTTPEndpoint(secure: secure, host: host, port: c.port ?? (secure ? 443 : 80)), target, user, password)
    }
}
