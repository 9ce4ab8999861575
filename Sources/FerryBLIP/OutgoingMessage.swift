/// A message being sent: its encoded stream, how far it has been framed, and its
/// flow-control counters. Owned by `BLIPSession`.
final class OutgoingMessage {
    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    let stream: [UInt8]
    /// Stream bytes already framed.
    var offset = 0
    /// Bytes on the wire so far: each frame's payload (compressed size) plus its 4-byte CRC.
    var bytesSent = 0
    /// The highest byte count the peer acknowledged.
    var bytesAcked = 0
    /// Out of the queue until an ACK brings the unacknowledged bytes below the limit.
    var frozen = false

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, stream: [UInt8]) {
        self.type = type; self.number = number; self.flags = flags; self.stream = stream
    }

    var isUrgent: Bool { flags.contains(.urgent) }
    var started: Bool { offset > 0 }
    var finished: Bool { offset >= stream.count && (stream.count > 0 || offset > 0) }
    var unacked: Int { bytesSent - bytesAcked }
}
