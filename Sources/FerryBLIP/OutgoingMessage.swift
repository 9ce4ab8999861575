/// A message being sent: its encoded stream, how far it has been framed, and its
/// flow-control counters. Owned by `BLIPSession`.
final class OutgoingMessage {
    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    /// varint(len(properties)) ‖ properties: the stream's head, kept apart from the body so a
    /// large body is never copied into a concatenated stream.
    let prefix: [UInt8]
    /// The body: the rest of the stream.
    let body: [UInt8]
    /// Stream bytes already framed.
    var offset = 0
    /// Bytes on the wire so far: each frame's payload (compressed size) plus its 4-byte CRC.
    var bytesSent = 0
    /// The highest byte count the peer acknowledged.
    var bytesAcked = 0
    /// Out of the queue until an ACK brings the unacknowledged bytes below the limit.
    var frozen = false
    /// In the session's table of messages that ACKs may name (it spans frames).
    var registered = false

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, message: BLIPMessage) {
        self.type = type; self.number = number; self.flags = flags
        prefix = message.encodedPrefix()
        body = message.body
    }

    /// The stream's length.
    var count: Int { prefix.count + body.count }

    /// Calls `use` with stream bytes `[offset, offset + length)`, copying into `scratch` only
    /// when the range spans the prefix and the body.
    func withSlice<R>(_ offset: Int, _ length: Int, scratch: inout [UInt8],
                      _ use: (UnsafeRawBufferPointer) throws(BLIPError) -> R) throws(BLIPError) -> R {
        let end = offset + length
        if end <= prefix.count || offset >= prefix.count {
            let (source, start) = end <= prefix.count ? (prefix, offset) : (body, offset - prefix.count)
            return try source.withUnsafeBytes { raw in
                Result { () throws(BLIPError) in try use(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])) }
            }.get()
        }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: prefix[offset...])
        scratch.append(contentsOf: body[..<(end - prefix.count)])
        return try scratch.withUnsafeBytes { raw in Result { () throws(BLIPError) in try use(raw) } }.get()
    }

    var isUrgent: Bool { flags.contains(.urgent) }
    var started: Bool { offset > 0 }

    var unacked: Int { bytesSent - bytesAcked }
}
