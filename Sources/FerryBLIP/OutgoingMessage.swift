/// A message being sent: its properties and body, how far it has been framed, and its
/// flow-control counters. Owned by `BLIPSession`.
final class OutgoingMessage {
    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    let properties: BLIPProperties
    /// The encoded properties' length.
    let propertiesLength: Int
    /// The length of varint(len(properties)) ‖ properties, the stream's head.
    let prefixCount: Int
    /// The body: the rest of the stream, never copied into a concatenated stream.
    let body: [UInt8]
    /// The encoded head, built only for a message that spans frames or is compressed (one that
    /// goes out whole in one frame has its properties encoded straight into the frame).
    private var prefixStorage: [UInt8]?
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
        properties = message.properties
        propertiesLength = message.properties.encodedLength
        prefixCount = Varint.length(UInt64(propertiesLength)) + propertiesLength
        body = message.body
    }

    /// The stream's length.
    var count: Int { prefixCount + body.count }

    /// The encoded head.
    private var prefix: [UInt8] {
        if let p = prefixStorage { return p }
        var p: [UInt8] = []
        p.reserveCapacity(prefixCount)
        writePrefix(into: &p)
        prefixStorage = p
        return p
    }

    /// Appends varint(len(properties)) ‖ properties to `out`.
    func writePrefix(into out: inout [UInt8]) {
        Varint.write(UInt64(propertiesLength), into: &out)
        properties.encode(into: &out)
    }

    /// Calls `use` with stream bytes `[offset, offset + length)`, copying into `scratch` only
    /// when the range spans the prefix and the body.
    func withSlice<R>(_ offset: Int, _ length: Int, scratch: inout [UInt8],
                      _ use: (UnsafeRawBufferPointer) throws(BLIPError) -> R) throws(BLIPError) -> R {
        let end = offset + length
        if end <= prefixCount || offset >= prefixCount {
            let (source, start) = end <= prefixCount ? (prefix, offset) : (body, offset - prefixCount)
            return try source.withUnsafeBytes { raw in
                Result { () throws(BLIPError) in try use(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])) }
            }.get()
        }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: prefix[offset...])
        scratch.append(contentsOf: body[..<(end - prefixCount)])
        return try scratch.withUnsafeBytes { raw in Result { () throws(BLIPError) in try use(raw) } }.get()
    }

    var isUrgent: Bool { flags.contains(.urgent) }
    var started: Bool { offset > 0 }

    var unacked: Int { bytesSent - bytesAcked }
}
