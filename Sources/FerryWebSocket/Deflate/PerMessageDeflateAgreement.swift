/// What a connection runs with after permessage-deflate was negotiated, seen from one side:
/// how we compress what we send and how the peer compresses what we receive.
public struct PerMessageDeflateAgreement: Sendable, Equatable {
    /// The parameters of the accepted response, as sent on the wire.
    public var response: PerMessageDeflateParameters
    /// We reset our compressor after every message.
    public var sendNoContextTakeover: Bool
    /// Our compressor's window (base-2 log), 8…15.
    public var sendMaxWindowBits: Int
    /// The peer resets its compressor after every message, so we reset our decompressor too.
    public var receiveNoContextTakeover: Bool
    /// The peer's window (base-2 log), 8…15.
    public var receiveMaxWindowBits: Int
    /// zlib compression level for what we send.
    public var compressionLevel: Int
    /// zlib memory level for our compressor.
    public var memoryLevel: Int
    /// Messages shorter than this are sent uncompressed.
    public var minimumSize: Int

    /// The agreement for `role` from an accepted response and our options.
    @_spi(Fuzzing) public init(role: WebSocketRole, response: PerMessageDeflateParameters, options: PerMessageDeflateOptions) {
        self.response = response
        let serverBits = response.serverMaxWindowBits ?? 15
        let clientBits = response.clientMaxWindowBits ?? 15
        switch role {
        case .server:
            sendNoContextTakeover = response.serverNoContextTakeover
            sendMaxWindowBits = min(serverBits, PerMessageDeflateOptions.clampBits(options.serverMaxWindowBits))
            receiveNoContextTakeover = response.clientNoContextTakeover
            receiveMaxWindowBits = clientBits
        case .client:
            // A client may always choose not to take over its context; it promised so if asked.
            sendNoContextTakeover = response.clientNoContextTakeover || options.clientNoContextTakeover
            sendMaxWindowBits = min(clientBits, PerMessageDeflateOptions.clampBits(options.clientMaxWindowBits))
            receiveNoContextTakeover = response.serverNoContextTakeover
            receiveMaxWindowBits = serverBits
        }
        compressionLevel = min(max(options.compressionLevel, 0), 9)
        memoryLevel = min(max(options.memoryLevel, 1), 9)
        minimumSize = max(options.minimumSize, 0)
    }
}
