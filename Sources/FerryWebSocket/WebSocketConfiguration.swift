import FerryHTTP
/// Limits and timers of a WebSocket connection or server. A value type: copy and adjust.
public struct WebSocketConfiguration: Sendable {
    /// The head limits FerryHTTP's parser applies to the upgrade (`maxHeaderSize`).
    var headLimits: HTTPLimits {
        var l = HTTPLimits()
        l.maxHeadSize = maxHeaderSize
        return l
    }

    /// The largest frame payload accepted; larger frames close with 1009. Default 16 MiB.
    public var maxFrameSize = 16 << 20
    /// The largest message (all fragments) accepted; larger ones close with 1009. Default 16 MiB.
    public var maxMessageSize = 16 << 20
    /// The largest HTTP head accepted during the upgrade; larger ones get 431 (server) or fail
    /// the connect (client). Default 16 KiB.
    public var maxHeaderSize = 16 * 1024
    /// Seconds allowed for the whole opening handshake (slowloris guard). Default 10.
    public var handshakeTimeout = 10.0
    /// Seconds to wait for the peer's close frame or TCP close after we sent ours. Default 5.
    public var closeTimeout = 5.0
    /// When set, a ping is sent after this many idle seconds. Default nil (off).
    public var pingInterval: Double? = nil
    /// Seconds to wait for a pong to a keep-alive ping before closing with 1011. Default 20.
    public var pingTimeout = 20.0
    /// Server only: connections (handshaking or open) beyond this get HTTP 503. Default 100,000.
    public var maxConnections = 100_000
    /// Server only: connections from one client address beyond this get HTTP 503, so one
    /// host cannot take every slot. Default 1,000.
    public var maxConnectionsPerAddress = 1_000
    /// Subprotocols offered (client) or supported (server), in preference order.
    public var subprotocols: [String] = []
    /// Extra request headers (client) or response headers (server).
    public var extraHeaders = HTTPHeaders()
    /// Bytes of queued output above which `send` suspends (async API) and the loop-level
    /// handler is told it is not writable. Default 256 KiB.
    public var writeHighWaterMark = 256 * 1024
    /// Inbound messages buffered for an async reader before reading from the socket pauses.
    public var inboundBufferLimit = 64

    /// permessage-deflate (RFC 7692): nil (the default) neither offers nor accepts it — BLIP
    /// compresses inside its own frames and Couchbase peers refuse the extension. Set, a client
    /// offers it and a server accepts a client's offer, with these preferences.
    public var permessageDeflate: PerMessageDeflateOptions? = nil

    /// The defaults.
    public init() {}
}
