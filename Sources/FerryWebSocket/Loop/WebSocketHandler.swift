/// Receives the events of a loop-level `WebSocketConnection`. Every method runs on the
/// connection's event loop thread, with no task or thread hop: the layer BLIP, replication and
/// `ferry-echo` build on.
public protocol WebSocketHandler: AnyObject {
    /// The handshake completed; the connection is open.
    func webSocketDidOpen(_ connection: WebSocketConnection)
    /// A complete message arrived. `payload` is borrowed: valid only during the call.
    func webSocket(_ connection: WebSocketConnection, didReceive kind: MessageKind, payload: UnsafeRawBufferPointer)
    /// A pong arrived (answers to pings are matched by the connection; this is for observers).
    func webSocket(_ connection: WebSocketConnection, didReceivePong payload: UnsafeRawBufferPointer)
    /// The output queue crossed its high (false) or low (true) watermark.
    func webSocket(_ connection: WebSocketConnection, writabilityChanged writable: Bool)
    /// The connection is closed, exactly once. `code` is the peer's close code (1005 if its
    /// frame had none, 1006 if the connection dropped without one); `error` is set when the
    /// connection failed (protocol error, timeout, transport error).
    func webSocketDidClose(_ connection: WebSocketConnection, code: CloseCode, reason: String, error: WebSocketError?)
}

extension WebSocketHandler {
    public func webSocketDidOpen(_ connection: WebSocketConnection) {}
    public func webSocket(_ connection: WebSocketConnection, didReceivePong payload: UnsafeRawBufferPointer) {}
    public func webSocket(_ connection: WebSocketConnection, writabilityChanged writable: Bool) {}
}
