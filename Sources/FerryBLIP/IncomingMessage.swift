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
    /// The properties' length, once its varint has arrived.
    var propertiesLength: Int?

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags) {
        self.type = type; self.number = number; self.flags = flags
    }

    /// Parses the message once all its frames are in.
    func complete() throws(BLIPError) -> BLIPMessage {
        let msg: BLIPMessage = try stream.withUnsafeBytes { raw in
            Result { () throws(BLIPError) -> BLIPMessage in
                guard let (len, n) = try Varint.read(raw, at: 0) else { throw .protocolError("message ends inside its properties length") }
                guard len <= UInt64(BLIPConstants.maxPropertiesSize) else { throw .protocolError("properties larger than 100 KiB") }
                guard n + Int(len) <= raw.count else { throw .protocolError("message ends inside its properties") }
                let props = try BLIPProperties.decode(UnsafeRawBufferPointer(rebasing: raw[n..<(n + Int(len))]))
                return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing),
                                   properties: props, body: Array(raw[(n + Int(len))...]))
            }
        }.get()
        return msg
    }
}
