import CFerrySystem

/// A message arriving in several frames: its uncompressed stream so far and its flow-control
/// counters.
///
/// The first MiB of the stream (which holds the properties: they are at most 100 KiB) is kept
/// in `head`. A message that grows past it moves its body into one buffer whose capacity is
/// reserved up front, up to the message size limit: address space — the kernel backs the pages
/// as bytes arrive (with huge pages where it can) — so the body is written once, never moved by
/// growth (an array doubling from 64 to 128 MiB held both copies at once) and handed over
/// without a final copy. Resident memory stays at the bytes received plus the head. Each
/// session lends such reservations from a `BodyReservations` budget (two full-size ones), so
/// many concurrent large messages cannot multiply the address space (or, under strict
/// overcommit, the committed memory) a peer makes us reserve; past it a body grows as an
/// ordinary array.
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
    /// Reservations at least this big are advised huge pages (smaller ones may lie in the
    /// malloc heap, where the advice would outlive them).
    static let hugePageAdviceMinimum = 32 << 20

    let type: BLIPMessageType
    let number: UInt64
    let flags: BLIPFlags
    /// The most stream bytes the message may have (the session refuses more).
    let limit: Int
    /// Where this message's body reservation comes from and goes back to.
    let reservations: BodyReservations
    /// The stream's start: all of it while it is under `chunkSize`, then only the properties.
    @exclusivity(unchecked) private var head: [UInt8] = []
    /// The body, once the stream outgrew `chunkSize` (`head` then holds only the properties).
    @exclusivity(unchecked) private var body: [UInt8]?
    /// Bytes of `reservations` this message holds.
    @exclusivity(unchecked) private var reserved = 0
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

    init(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, limit: Int, reservations: BodyReservations) {
        self.type = type; self.number = number; self.flags = flags; self.limit = limit
        self.reservations = reservations
    }

    deinit { reservations.give(reserved) }

    /// Appends stream bytes (the caller has checked they stay within `limit`).
    func append(_ bytes: UnsafeRawBufferPointer) {
        count += bytes.count
        if body != nil {
            body?.append(contentsOf: bytes)
            return
        }
        // Fill the head up to `chunkSize` only: the rest of a large (inflated) frame goes
        // straight into the body, not through the head first.
        // (No room left: separation was refused for a bad properties length, which the
        // session rejects before another append.)
        let room = Self.chunkSize - head.count
        guard room > 0, bytes.count >= room else {
            head.append(contentsOf: bytes)
            return
        }
        head.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[..<room]))
        separateBody()
        let rest = UnsafeRawBufferPointer(rebasing: bytes[room...])
        if body != nil { body?.append(contentsOf: rest) } else { head.append(contentsOf: rest) }
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
        var b: [UInt8] = []
        let want = limit - headLength
        if reservations.take(want) {
            reserved = want
            b.reserveCapacity(want)
            if want >= Self.hugePageAdviceMinimum {
                b.withUnsafeMutableBufferPointer { out in
                    if let base = out.baseAddress { ferry_advise_huge_pages(base, want) }
                }
            }
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
        reservations.give(reserved)
        reserved = 0
    }

    /// Builds the message once all its frames are in.
    func complete() throws(BLIPError) -> BLIPMessage {
        let (props, headLength) = try head.withUnsafeBytes { raw in
            Result { () throws(BLIPError) in try Self.parseHead(raw) }
        }.get()
        var result: [UInt8]
        if let body {
            // A body far smaller than its reservation is copied out (cheaply: it is small), so
            // the application never holds on to a reservation it does not fill.
            result = body.capacity - body.count > 4 * body.count ? Self.exactCopy(body) : body
        } else {
            // Under a MiB: the body is the buffer itself, the properties removed in place.
            result = head
            head = []
            result.removeSubrange(0..<headLength)
        }
        head = []
        body = nil
        reservations.give(reserved)
        reserved = 0
        return BLIPMessage(type: type, number: number, flags: flags.subtracting(.moreComing), properties: props, body: result)
    }

    /// A copy of `bytes` with no spare capacity (`Array(bytes)` would share the storage).
    static func exactCopy(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { out, initialized in
            bytes.withUnsafeBufferPointer { src in
                if let s = src.baseAddress, let d = out.baseAddress { d.initialize(from: s, count: src.count) }
            }
            initialized = bytes.count
        }
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

/// The address space a session lets its incoming messages reserve for their bodies at once
/// (see `IncomingMessage`). Used on the session's thread only.
final class BodyReservations {
    private var available: Int

    /// Room for `messages` reservations of `limit` bytes, but never more than half the
    /// machine's memory.
    init(limit: Int, messages: Int = 2) {
        let physical = Int(clamping: ferry_physical_memory())
        let wanted = limit.multipliedReportingOverflow(by: messages)
        let total = wanted.overflow ? Int.max : wanted.partialValue
        available = physical > 0 ? Swift.min(total, physical / 2) : total
    }

    /// Takes `n` bytes if that many are left.
    func take(_ n: Int) -> Bool {
        guard n > 0, n <= available else { return false }
        available -= n
        return true
    }

    /// Returns bytes taken earlier.
    func give(_ n: Int) {
        available += n
    }
}
