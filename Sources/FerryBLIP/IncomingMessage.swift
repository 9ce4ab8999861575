/// A message arriving in several frames: its uncompressed stream so far and its flow-control
/// counters.
///
/// The stream is kept in chunks of 1 MiB rather than one doubling array: growing an array from
/// 64 to 128 MiB holds both copies at once, so a 100 MiB body peaked near 1.3–2× its size.
/// Completion copies the chunks into the body one by one, freeing each as it goes, so the peak
/// stays at the body plus one chunk. Messages of one chunk are handed over without a copy.
final class IncomingMessage {
    // `@exclusivity(unchecked)` on the stored properties below: Swift checks exclusive access to
    // class properties at run time, and those checks were ~13% of a small-message round trip.
    // Safe because every access happens on the owning event loop's thread, and no method keeps
    // an `inout` access to one of them open across a call that could reach it again (callbacks
    // run after the access ends; `pump` moves `frameBuffer` out before framing). The debug test
    // suite ran with the checks on before they were turned off.
    /// The size of each full chunk (also bigger than the largest properties block, so the
    /// properties always lie in the first chunk).
    static let chunkSize = 1 << 20

    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    /// Full chunks, then the one being filled.
    @exclusivity(unchecked) private var chunks: [[UInt8]] = []
    @exclusivity(unchecked) private var tail: [UInt8] = []
    /// Stream bytes received (uncompressed).
    @exclusivity(unchecked) private(set) var count = 0
    /// Wire bytes received: payloads (as sent) plus CRCs.
    @exclusivity(unchecked) var bytesReceived = 0
    /// The byte count in our last ACK of this message.
    @exclusivity(unchecked) var bytesAcked = 0
    /// Whether the properties' length has arrived and passed the size limit.
    @exclusivity(unchecked) var propertiesChecked = false
    /// Whether the owner was offered to stream the body (once, when the properties arrived).
    @exclusivity(unchecked) var offered = false
    /// Where the body goes when it is streamed: set when the owner accepts, after which
    /// nothing is assembled here.
    @exclusivity(unchecked) var sink: IncomingBody?

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags) {
        self.type = type; self.number = number; self.flags = flags
    }

    /// Appends stream bytes.
    func append(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        while !rest.isEmpty {
            if tail.count == Self.chunkSize {
                chunks.append(tail)
                tail = []
                tail.reserveCapacity(Self.chunkSize)
            }
            let n = min(Self.chunkSize - tail.count, rest.count)
            tail.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
        count += bytes.count
    }

    /// The properties length at the head of the stream, once its varint has arrived.
    func propertiesLength() throws(BLIPError) -> UInt64? {
        try (chunks.first ?? tail).withUnsafeBytes { raw in
            Result { () throws(BLIPError) in try Varint.read(raw, at: 0)?.0 }
        }.get()
    }

    /// The properties and the head's length, once the whole properties block has arrived
    /// (it lies in the first chunk: the block is at most 100 KiB).
    func completeHead() throws(BLIPError) -> (BLIPProperties, Int)? {
        try (chunks.first ?? tail).withUnsafeBytes { raw in
            Result { () throws(BLIPError) -> (BLIPProperties, Int)? in
                guard let (len, n) = try Varint.read(raw, at: 0), len <= UInt64(BLIPConstants.maxPropertiesSize),
                      n + Int(len) <= raw.count else { return nil }
                return try Self.parseHead(raw)
            }
        }.get()
    }

    /// Hands the body bytes received so far (after a head of `headLength` bytes) to `sink`
    /// and frees them here.
    func moveBody(after headLength: Int, into sink: IncomingBody) {
        var pieces = chunks
        pieces.append(tail)
        chunks = []
        tail = []
        for (i, piece) in pieces.enumerated() {
            let skip = i == 0 ? headLength : 0
            guard piece.count > skip else { continue }
            piece.withUnsafeBytes { sink.append(UnsafeRawBufferPointer(rebasing: $0[skip...])) }
        }
    }

    /// Builds the message once all its frames are in.
    func complete() throws(BLIPError) -> BLIPMessage {
        let first = chunks.first ?? tail
        let (props, headLength) = try first.withUnsafeBytes { raw in
            Result { () throws(BLIPError) in try Self.parseHead(raw) }
        }.get()
        let body: [UInt8]
        if chunks.isEmpty {
            // One chunk: the body is the buffer itself, the properties removed in place.
            var buffer = tail
            tail = []
            buffer.removeSubrange(0..<headLength)
            body = buffer
        } else {
            var pieces = chunks
            pieces.append(tail)
            chunks = []
            tail = []
            body = [UInt8](unsafeUninitializedCapacity: count - headLength) { out, initialized in
                var at = 0
                for i in pieces.indices {
                    let skip = i == 0 ? headLength : 0
                    pieces[i].withUnsafeBytes { raw in
                        guard let src = raw.baseAddress, raw.count > skip, let dst = out.baseAddress else { return }
                        (dst + at).initialize(from: (src + skip).assumingMemoryBound(to: UInt8.self), count: raw.count - skip)
                        at += raw.count - skip
                    }
                    // Free each chunk once copied: the peak stays one chunk above the body.
                    pieces[i] = []
                }
                initialized = at
            }
        }
        return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing), properties: props, body: body)
    }

    /// Parses a whole message that arrived in one frame, copying only its body.
    static func parse(type: BLIPMessageType, number: UInt64, flags: BLIPFlags,
                      stream: UnsafeRawBufferPointer) throws(BLIPError) -> BLIPMessage {
        let (props, headLength) = try parseHead(stream)
        return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing), properties: props,
                           body: Array(UnsafeRawBufferPointer(rebasing: stream[headLength...])))
    }

    /// Decodes varint(len) ‖ properties at the start of a stream; returns them and their length.
    static func parseHead(_ raw: UnsafeRawBufferPointer) throws(BLIPError) -> (BLIPProperties, Int) {
        guard let (len, n) = try Varint.read(raw, at: 0) else { throw .protocolError("message ends inside its properties length") }
        guard len <= UInt64(BLIPConstants.maxPropertiesSize) else { throw .protocolError("properties larger than 100 KiB") }
        guard n + Int(len) <= raw.count else { throw .protocolError("message ends inside its properties") }
        return (try BLIPProperties.decode(UnsafeRawBufferPointer(rebasing: raw[n..<(n + Int(len))])), n + Int(len))
    }
}
