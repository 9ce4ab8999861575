/// A message being received: the uncompressed stream so far and its flow-control counter.
final class IncomingMessage {
    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    var stream: [UInt8] = []
    /// Wire bytes received: payloads (as sent) plus CRCs.
    var bytesReceived = 0
    /// The byte count in our last ACK of this message.
    var bytesAcked = 0
    /// Whether the properties' length has arrived and passed the size limit.
    var propertiesChecked = false

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags) {
        self.type = type; self.number = number; self.flags = flags
    }

    /// Parses the message once all its frames are in. The body is the received buffer itself,
    /// with the properties removed in place (no second copy of a large body).
    func complete() throws(BLIPError) -> BLIPMessage {
        var buffer = stream
        stream = []
        let (props, headLength) = try buffer.withUnsafeBytes { raw in
            Result { () throws(BLIPError) -> (BLIPProperties, Int) in
                guard let (len, n) = try Varint.read(raw, at: 0) else { throw .protocolError("message ends inside its properties length") }
                guard len <= UInt64(BLIPConstants.maxPropertiesSize) else { throw .protocolError("properties larger than 100 KiB") }
                guard n + Int(len) <= raw.count else { throw .protocolError("message ends inside its properties") }
                return (try BLIPProperties.decode(UnsafeRawBufferPointer(rebasing: raw[n..<(n + Int(len))])), n + Int(len))
            }
        }.get()
        buffer.removeSubrange(0..<headLength)
        return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing), properties: props, body: buffer)
    }
}
