/// A message being sent: its properties and body, how far it has been framed, and its
/// flow-control counters. Owned by `BLIPSession`.
///
/// A streamed message has an empty `body` and its bytes in `streamed`, written piece by piece
/// while it is being framed; `end` and `finished` tell the scheduler how far it may go.
final class OutgoingMessage {
    // `@exclusivity(unchecked)` on the stored properties below: Swift checks exclusive access to
    // class properties at run time, and those checks were ~13% of a small-message round trip.
    // Safe because every access happens on the owning event loop's thread, and no method keeps
    // an `inout` access to one of them open across a call that could reach it again (callbacks
    // run after the access ends; `pump` moves `frameBuffer` out before framing). The debug test
    // suite ran with the checks on before they were turned off.
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
    @exclusivity(unchecked) private var prefixStorage: [UInt8]?
    /// Stream bytes already framed.
    @exclusivity(unchecked) var offset = 0
    /// Bytes on the wire so far: each frame's payload (compressed size) plus its 4-byte CRC.
    @exclusivity(unchecked) var bytesSent = 0
    /// The highest byte count the peer acknowledged.
    @exclusivity(unchecked) var bytesAcked = 0
    /// Out of the queue until an ACK brings the unacknowledged bytes below the limit.
    @exclusivity(unchecked) var frozen = false
    /// In the session's table of messages that ACKs may name (it spans frames).
    @exclusivity(unchecked) var registered = false
    /// The stream's length so far (for a streamed message, it grows as the producer writes).
    @exclusivity(unchecked) private(set) var count: Int
    /// How far the stream may be framed now. A streamed message holds its last written body
    /// byte back until the producer finishes, so its final frame (the one without MoreComing)
    /// carries data; only a body that stays empty ends with an empty frame. The properties are
    /// never held back: the peer gets them at once.
    @exclusivity(unchecked) private(set) var end: Int
    /// False while a streamed message's producer may still write: no frame without MoreComing
    /// goes out before that.
    @exclusivity(unchecked) private(set) var finished = true
    /// A streamed message's written, unframed bytes; nil for a message sent whole.
    let streamed: OutgoingBodyQueue?
    /// A streamed message with nothing to frame: out of the queue until its producer writes
    /// or finishes.
    @exclusivity(unchecked) var starved = false

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, message: BLIPMessage) {
        self.type = type; self.number = number; self.flags = flags
        properties = message.properties
        propertiesLength = message.properties.encodedLength
        prefixCount = Varint.length(UInt64(propertiesLength)) + propertiesLength
        body = message.body
        count = prefixCount + body.count
        end = count
        streamed = nil
    }

    /// A streamed message: `message.body`, if any, is the start of the body; the rest comes
    /// through `appendStreamed` until `finishStream`.
    init(streaming type: BLIPMessageType, number: UInt64, flags: BLIPFlags, message: BLIPMessage) {
        self.type = type; self.number = number; self.flags = flags
        properties = message.properties
        propertiesLength = message.properties.encodedLength
        prefixCount = Varint.length(UInt64(propertiesLength)) + propertiesLength
        body = []
        let queue = OutgoingBodyQueue()
        queue.append(message.body)
        streamed = queue
        count = prefixCount + message.body.count
        finished = false
        end = max(prefixCount, count - 1)
    }

    /// Adds written bytes to a streamed message.
    func appendStreamed(_ bytes: [UInt8]) {
        guard let streamed, !finished else { return }
        streamed.append(bytes)
        count += bytes.count
        end = max(prefixCount, count - 1)
    }

    /// The producer is done: the rest may go, the last frame without MoreComing.
    func finishStream() {
        finished = true
        end = count
    }

    /// Whether a frame can be cut now (possibly an empty final one).
    var hasFrameReady: Bool { finished || offset < end }

    /// Records that stream bytes up to `newOffset` are framed, releasing streamed pieces.
    func advance(to newOffset: Int) {
        if let streamed {
            let framedBody = newOffset - max(offset, prefixCount)
            if framedBody > 0 { streamed.consume(framedBody) }
        }
        offset = newOffset
    }

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
        if let streamed {
            if offset >= prefixCount { return try streamed.withFront(length, scratch: &scratch, use) }
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: prefix[offset..<min(end, prefixCount)])
            if end > prefixCount { streamed.appendFront(end - prefixCount, to: &scratch) }
            return try scratch.withUnsafeBytes { raw in Result { () throws(BLIPError) in try use(raw) } }.get()
        }
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
