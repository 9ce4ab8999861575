/// A snapshot of a `BLIPConnection`'s sending side, for monitoring flow control.
public struct BLIPFlowState: Sendable, Equatable {
    /// Wire bytes of message frames sent so far (ACKs excluded).
    public var bytesSent: Int
    /// Bytes sent and not yet acknowledged, over the messages still being sent: each message
    /// freezes at 128,000 of them.
    public var unacknowledgedBytes: Int
    /// Bytes queued for the socket and not yet written (WebSocket framing included).
    public var bufferedBytes: Int
    /// Whether some message is frozen waiting for the peer's ACKs.
    public var frozen: Bool

    /// Creates a snapshot.
    public init(bytesSent: Int, unacknowledgedBytes: Int, bufferedBytes: Int, frozen: Bool) {
        self.bytesSent = bytesSent
        self.unacknowledgedBytes = unacknowledgedBytes
        self.bufferedBytes = bufferedBytes
        self.frozen = frozen
    }
}
