/// How an endpoint wants permessage-deflate (RFC 7692) negotiated, when it is on
/// (`WebSocketConfiguration.permessageDeflate`; nil, the default, neither offers nor accepts it).
///
/// A client offers the extension with these preferences; a server accepts the first offer it
/// can honour, applying them on top of what the client asked. Window sizes are clamped to 8…15.
public struct PerMessageDeflateOptions: Sendable, Equatable {
    /// The server resets its compressor after every message (`server_no_context_takeover`):
    /// a client requests it, a server imposes it. Default false.
    public var serverNoContextTakeover = false
    /// The client resets its compressor after every message (`client_no_context_takeover`):
    /// a client promises it, a server requires it. Default false.
    public var clientNoContextTakeover = false
    /// The largest LZ77 window (base-2 log) the server may compress with
    /// (`server_max_window_bits`): a client asks for it when below 15, a server limits itself
    /// to it. Default 15.
    public var serverMaxWindowBits = 15
    /// The largest LZ77 window the client may compress with (`client_max_window_bits`): a
    /// client offers the parameter always (with this value when below 15); a server asks for
    /// it when below 15 and the client allowed it. Default 15.
    public var clientMaxWindowBits = 15
    /// zlib compression level, 0 (store) … 9 (best). Default 6.
    public var compressionLevel = 6
    /// zlib memory level, 1…9 (speed/memory trade-off of the compressor). Default 8.
    public var memoryLevel = 8
    /// Messages shorter than this many bytes are sent uncompressed (RSV1 clear). Default 0.
    public var minimumSize = 0

    /// The defaults: context takeover both ways, 32 KiB windows, level 6.
    public init() {}

    /// Creates options with the given no-context-takeover and window settings.
    public init(serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false,
                serverMaxWindowBits: Int = 15, clientMaxWindowBits: Int = 15) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// `bits` clamped to the RFC 7692 range 8…15.
    static func clampBits(_ bits: Int) -> Int { min(max(bits, 8), 15) }
}
