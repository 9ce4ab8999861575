import CFerrySystem

/// A message arriving in several frames: its uncompressed stream so far and its flow-control
/// counters.
///
/// The first MiB of the stream (which holds the properties: they are at most 100 KiB) is kept
/// in `head`. A message that grows past it moves its body into one buffer whose capacity is
/// reserved up front, up to the message size limit: address space only — the kernel backs the
/// pages as bytes arrive (with huge pages where it can) — so the body is written once, never
/// moved by growth (an array doubling from 64 to 128 MiB held both copies at once) and handed
/// over without a final copy. Resident memory stays at the bytes received plus the head.
final class IncomingMessage {
    // `@exclusivity(unchecked)` on the stored properties below: Swift checks exclusive access to
    // class properties at run time, and those checks were ~13% of a small-message round trip.
    // Safe because every access happens on the owning event loop's thread, and no method keeps
    // an `inout` access to one of them open across a call that could reach it again (callbacks
    // run after the access ends; `pump` moves `frameBuffer` out before framing). The debug test
    // suite ran with the checks on before they were turned off.
    /// The stream size from which the body gets a buffer of its own (also bigger than the
    /// largest properties block, so the properties always lie in `head`).
    static let chunkSize = 1 << 20

    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    /// The most stream bytes the message may have (the session refuses more).
    let limit: Int
    /// The stream's start: all of it while it is under `chunkSize`, then only the properties.
    @exclusivity(unchecked) private var head: [UInt8] = []
    /// The body, once the stream outgrew `chunkSize` (`head` then holds only the properties).
    @exclusivity(unchecked) private var body: [UInt8]?
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

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, limit: Int) {
        self.type = type; self.number = number; self.flags = flags; self.limit = limit
    }

    /// Appends stream bytes (the caller has checked they stay within `limit`).
    func append(_ bytes: UnsafeRawBufferPointer) {
        count += bytes.count
        if body != nil {
            body?.append(contentsOf: bytes)
            return
        }
        head.append(contentsOf: bytes)
        if head.count >= Self.chunkSize { separateBody() }
    }

    /// Moves the body out of `head` into a buffer reserved for the rest of the message. Left
    /// for later if the properties' length is bad (the session refuses the message anyway).
    private func separateBody() {
        let headLength: Int? = head.withUnsafeBytes { raw in
            guard let (len, n) = try? Varint.read(raw, at: 0), len <= UInt64(BLIPConstants.maxPropertiesSize),
                  n + Int(len) <= raw.count else { return nil }
            return n + Int(len)
        }
        guard let headLength else { return }
        // Reserve for the largest body the limit allows, but never a share of the machine's
        // memory that a strict overcommit policy could refuse (beyond it the array grows).
        let physical = Int(clamping: ferry_physical_memory())
        let reserve = Swift.max(head.count - headLength, Swift.min(limit - headLength, physical > 0 ? physical / 4 : limit))
        var b: [UInt8] = []
        b.reserveCapacity(reserve)
        b.withUnsafeMutableBufferPointer { out in
            if let base = out.baseAddress { ferry_advise_huge_pages(base, reserve) }
        }
        head.withUnsafeBytes { b.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[headLength...])) }
        head = Array(head[..<headLength])
        body = b
    }

    /// The properties length at the head of the stream, once its varint has arrived.
    func propertiesLength() throws(BLIPError) -> UInt64? {
        try head.withUnsafeBytes { raw in
            Result { () throws(BLIPError) in try Varint.read(raw, at: 0)?.0 }
        }.get()
    }

    /// The properties and the head's length, once the whole properties block has arrived.
    func completeHead() throws(BLIPError) -> (BLIPProperties, Int)? {
        try head.withUnsafeBytes { raw in
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
        if head.count > headLength {
            head.withUnsafeBytes { sink.append(UnsafeRawBufferPointer(rebasing: $0[headLength...])) }
        }
        if let body, !body.isEmpty { body.withUnsafeBytes { sink.append($0) } }
        head = []
        body = nil
    }

    /// Builds the message once all its frames are in.
    func complete() throws(BLIPError) -> BLIPMessage {
        let (props, headLength) = try head.withUnsafeBytes { raw in
            Result { () throws(BLIPError) in try Self.parseHead(raw) }
        }.get()
        var result: [UInt8]
        if let body {
            result = body
        } else {
            // Under a MiB: the body is the buffer itself, the properties removed in place.
            result = head
            head = []
            result.removeSubrange(0..<headLength)
        }
        head = []
        body = nil
        return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing), properties: props, body: result)
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
