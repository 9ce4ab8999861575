/// Limits and tuning of a BLIP session.
public struct BLIPConfiguration: Sendable {
    /// The largest message (properties + body, uncompressed) accepted. Default 64 MiB.
    public var maxMessageSize = 64 << 20
    /// The deflate level for compressed messages (0 sends them uncompressed). Default 6.
    public var compressionLevel: Int32 = 6
    /// How far a streamed body may run ahead of its consumer, in bytes. Sending: `write`
    /// suspends while more than this is written and not yet framed. Receiving: the message's
    /// ACKs are withheld while the reader has this much not yet taken (its sender then stops
    /// at BLIP's 128,000-byte window), and the socket stops being read past four times this.
    /// Default 256 KiB.
    public var streamWindow = 256 * 1024
    /// Creates the defaults.
    public init() {}
}

/// The sans-I/O core of one BLIP 3 connection (Protocol/blip.md): fed each received WebSocket
/// binary message, it returns complete messages; asked for the next frame to send, it runs the
/// outbox scheduler (round robin, urgent insertion, 16 KiB / 4 KiB frames), compression, the
/// running CRCs and flow control (ACKs, freezing at 128,000 unacknowledged bytes). No sockets,
/// threads or clocks. Not thread-safe: one owner drives it.
@_spi(Fuzzing) public final class BLIPSession {
    // `@exclusivity(unchecked)` on the stored properties below: Swift checks exclusive access to
    // class properties at run time, and those checks were ~13% of a small-message round trip.
    // Safe because every access happens on the owning event loop's thread, and no method keeps
    // an `inout` access to one of them open across a call that could reach it again (callbacks
    // run after the access ends; `pump` moves `frameBuffer` out before framing). The debug test
    // suite ran with the checks on before they were turned off.
    /// The limits.
    public let configuration: BLIPConfiguration
    @exclusivity(unchecked) private var outbox = Outbox()
    @exclusivity(unchecked) var acks: [[UInt8]] = []
    /// Messages with frames left to send after their first, by number: what ACKs look up.
    /// Single-frame messages, the common case, never enter these tables.
    @exclusivity(unchecked) private var outgoingRequests = NumberMap<OutgoingMessage>()
    @exclusivity(unchecked) private var outgoingResponses = NumberMap<OutgoingMessage>()
    /// Messages partly received (more frames coming), by number.
    @exclusivity(unchecked) private var incomingRequests = NumberMap<IncomingMessage>()
    @exclusivity(unchecked) private var incomingResponses = NumberMap<IncomingMessage>()
    /// Requests we sent that expect a response, by number (the value is unused).
    @exclusivity(unchecked) var awaitingResponse = NumberMap<Bool>()
    /// Requests we received that expect a response, by number, with their urgency.
    @exclusivity(unchecked) var owedResponses = NumberMap<Bool>()
    @exclusivity(unchecked) var nextRequestNumber: UInt64 = 1
    @exclusivity(unchecked) private var lastIncomingRequest: UInt64 = 0
    @exclusivity(unchecked) private var outCRC = BLIPChecksum()
    /// Reused for the rare frame that spans a message's properties and body.
    @exclusivity(unchecked) private var scratch: [UInt8] = []
    /// Reused for a compressed frame's inflated payload.
    @exclusivity(unchecked) private var inflated: [UInt8] = []
    @exclusivity(unchecked) private var inCRC = BLIPChecksum()
    private lazy var deflater = BLIPDeflater(level: configuration.compressionLevel)
    private lazy var inflater = BLIPInflater(maxOutput: configuration.maxMessageSize + 64)
    /// What incoming messages may reserve for their bodies (`IncomingMessage`).
    private lazy var bodyReservations = BodyReservations(limit: configuration.maxMessageSize + 16)
    /// Asked once per multi-frame message, when its properties have arrived (the message is
    /// given with an empty body): a body to stream it into, or nil to assemble it whole.
    /// Must not call back into the session.
    @exclusivity(unchecked) var openStream: ((BLIPMessage) -> IncomingBody?)?

    /// Creates a session.
    public init(configuration: BLIPConfiguration = BLIPConfiguration()) {
        self.configuration = configuration
    }

    // MARK: Sending

    /// Queues a request; returns the number it goes out with (requests are numbered 1, 2, …
    /// in the order their first frames are sent).
    @discardableResult
    public func send(request: BLIPMessage) -> UInt64 {
        let (number, flags) = numberRequest(request)
        enqueue(OutgoingMessage(type: .request, number: number, flags: flags, message: request))
        return number
    }

    /// Gives a request its number and the flags it goes out with, and records that it awaits a
    /// response (unless NoReply).
    func numberRequest(_ request: BLIPMessage) -> (UInt64, BLIPFlags) {
        let number = nextRequestNumber
        nextRequestNumber += 1
        var flags = request.flags.intersection([.urgent, .compressed, .noReply])
        if configuration.compressionLevel == 0 { flags.remove(.compressed) }
        if !flags.contains(.noReply) { awaitingResponse.insert(true, for: number) }
        return (number, flags)
    }

    /// Queues the response (or error response, `type: .error`) to request `number`. The
    /// response is urgent when the request was. Throws for a request that wants none or was
    /// already answered.
    public func send(response: BLIPMessage, to number: UInt64) throws(BLIPError) {
        let (type, flags) = try claimResponse(response, to: number)
        enqueue(OutgoingMessage(type: type, number: number, flags: flags, message: response))
    }

    /// Takes the response owed to request `number` (throws if none is) and gives its message
    /// type and flags: urgent when the request was.
    func claimResponse(_ response: BLIPMessage, to number: UInt64) throws(BLIPError) -> (BLIPMessageType, BLIPFlags) {
        guard let urgent = owedResponses.removeValue(forKey: number) else {
            throw .invalidRequest("no response is owed to request #\(number)")
        }
        var flags = response.flags.intersection([.compressed])
        if urgent { flags.insert(.urgent) }
        if configuration.compressionLevel == 0 { flags.remove(.compressed) }
        return (response.type == .error ? .error : .response, flags)
    }

    /// Queues an error response to request `number`.
    public func sendError(to number: UInt64, domain: String = "BLIP", code: Int, message: String) throws(BLIPError) {
        let err = BLIPMessage(type: .error, properties: [("Error-Domain", domain), ("Error-Code", String(code))],
                              body: Array(message.utf8))
        try send(response: err, to: number)
    }

    /// Wire bytes of message frames sent so far (ACKs excluded).
    @exclusivity(unchecked) public private(set) var messageBytesSent = 0

    /// True when some outgoing message waits for an ACK before it may send more.
    public var hasFrozenMessage: Bool {
        outgoingRequests.allValues.contains { $0.frozen } || outgoingResponses.allValues.contains { $0.frozen }
    }

    /// Wire bytes sent and not yet acknowledged, summed over the messages still being sent:
    /// what flow control bounds (each message freezes at 128,000).
    public var unacknowledgedBytes: Int {
        outgoingRequests.allValues.reduce(0) { $0 + $1.unacked } + outgoingResponses.allValues.reduce(0) { $0 + $1.unacked }
    }

    /// The next frame to send as one WebSocket binary message, or nil if nothing can go now
    /// (empty queue, or every message frozen awaiting ACKs).
    public func nextFrame() throws(BLIPError) -> [UInt8]? {
        var frame: [UInt8] = []
        return try nextFrame(into: &frame) ? frame : nil
    }

    /// Writes the next frame, whole, into `frame` (replacing its contents). Returns false,
    /// leaving `frame` empty, if nothing can go now. (A connection uses the `emit` form, which
    /// does not join the frame's parts.)
    public func nextFrame(into frame: inout [UInt8]) throws(BLIPError) -> Bool {
        var whole: [UInt8] = []
        let framed = try nextFrame(into: &frame) { head, body, tail in
            whole.reserveCapacity(head.count + body.count + tail.count)
            whole.append(contentsOf: head); whole.append(contentsOf: body); whole.append(contentsOf: tail)
        }
        frame = whole
        return framed
    }

    /// An empty part for `emit`.
    static var noBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    /// Frames the next frame and hands it to `emit` as three parts to send back to back, so the
    /// message's bytes need not be copied into a frame buffer first: the frame's start (built in
    /// `head`, the caller's buffer, reused between frames: message number, flags, and whatever
    /// had to be built, such as encoded properties or compressed data), a slice of the message
    /// (may be empty) and the 4-byte checksum (empty for an ACK). The parts are valid only
    /// during `emit`. Returns false, calling nothing, if nothing can go now.
    public func nextFrame(into head: inout [UInt8],
                          emit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) throws(BLIPError) -> Bool {
        head.removeAll(keepingCapacity: true)
        if !acks.isEmpty {
            head.append(contentsOf: acks.removeFirst())
            head.withUnsafeBytes { emit($0, Self.noBytes, Self.noBytes) }
            return true
        }
        guard let m = outbox.popFirst() else { return false }
        let nextIsUrgent = outbox.first?.isUrgent ?? false
        let budget = (!m.isUrgent && nextIsUrgent) ? BLIPConstants.frameSizeBeforeUrgent : BLIPConstants.maxFrameSize
        let offset = m.offset
        let count = m.end
        Varint.write(m.number, into: &head)
        let headerLength = head.count + 1
        let take = min(count - offset, budget - headerLength - 4)
        let more = offset + take < count || !m.finished
        var flags = BLIPFlags(type: m.type, m.flags)
        if more { flags.insert(.moreComing) }
        // The empty last frame of a streamed body goes uncompressed: zlib has no output for a
        // second sync flush without input, so it could not be deflated.
        if take == 0 { flags.remove(.compressed) }
        head.append(flags.rawValue)
        let compressed = flags.contains(.compressed)
        // The running checksum is updated in a local copy: one access to the stored property
        // instead of one per update.
        var running = outCRC
        let frameLength: Int
        if !compressed && offset == 0 && !more && m.streamed == nil {
            // A whole uncompressed message in one frame (the common case): its properties are
            // encoded straight into the head, the body goes out from the message itself.
            // The running checksum is stored before `emit`: the session's state is complete
            // whenever control leaves it.
            m.writePrefix(into: &head)
            head.withUnsafeBytes { running.update(UnsafeRawBufferPointer(rebasing: $0[headerLength...])) }
            m.body.withUnsafeBytes { body in
                running.update(body)
                outCRC = running
                withUnsafeBytes(of: running.value.bigEndian) { crc in
                    head.withUnsafeBytes { emit($0, body, crc) }
                }
            }
            frameLength = head.count + m.body.count + 4
        } else if compressed {
            try m.withSlice(offset, take, scratch: &scratch) { (slice) throws(BLIPError) in
                running.update(slice)
                try deflater.compress(slice, into: &head)
            }
            outCRC = running
            withUnsafeBytes(of: running.value.bigEndian) { crc in
                head.withUnsafeBytes { emit($0, Self.noBytes, crc) }
            }
            frameLength = head.count + 4
        } else {
            try m.withSlice(offset, take, scratch: &scratch) { slice in
                running.update(slice)
                outCRC = running
                withUnsafeBytes(of: running.value.bigEndian) { crc in
                    head.withUnsafeBytes { emit($0, slice, crc) }
                }
            }
            frameLength = head.count + take + 4
        }
        if m.streamed == nil { m.offset = offset + take } else { m.advance(to: offset + take) }
        m.bytesSent += frameLength - headerLength
        messageBytesSent += frameLength
        if more {
            if !m.registered {
                // Now that it spans frames, ACKs may name it.
                m.registered = true
                if m.type == .request { outgoingRequests.insert(m, for: m.number) } else { outgoingResponses.insert(m, for: m.number) }
            }
            if m.unacked >= BLIPConstants.maxUnackedBytes { m.frozen = true }
            else if !m.hasFrameReady { m.starved = true }   // a streamed body waiting for its producer
            else { enqueue(m) }
        } else if m.registered {
            if m.type == .request { _ = outgoingRequests.removeValue(forKey: m.number) }
            else { _ = outgoingResponses.removeValue(forKey: m.number) }
        }
        return true
    }

    /// Frames a message that goes out whole in one uncompressed frame when nothing is queued
    /// ahead of it (no message, no ACK), handing the parts to `emit` as `nextFrame` does: the
    /// frame `enqueue` and then `nextFrame` would produce, byte for byte, without allocating an
    /// `OutgoingMessage` — the usual case of a request or reply sent while the socket is
    /// writable. Returns false, calling nothing, when the message must be queued instead.
    func frameWhole(type: BLIPMessageType, number: UInt64, flags: BLIPFlags, message: BLIPMessage, into head: inout [UInt8],
                    emit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) -> Bool {
        guard outbox.isEmpty, acks.isEmpty, !flags.contains(.compressed) else { return false }
        let propertiesLength = message.properties.encodedLength
        let headerLength = Varint.length(number) + 1
        let streamLength = Varint.length(UInt64(propertiesLength)) + propertiesLength + message.body.count
        guard streamLength <= BLIPConstants.maxFrameSize - headerLength - 4 else { return false }
        head.removeAll(keepingCapacity: true)
        Varint.write(number, into: &head)
        head.append(BLIPFlags(type: type, flags).rawValue)
        Varint.write(UInt64(propertiesLength), into: &head)
        message.properties.encode(into: &head)
        var running = outCRC
        head.withUnsafeBytes { running.update(UnsafeRawBufferPointer(rebasing: $0[headerLength...])) }
        message.body.withUnsafeBytes { body in
            running.update(body)
            outCRC = running
            messageBytesSent += headerLength + streamLength + 4
            withUnsafeBytes(of: running.value.bigEndian) { crc in
                head.withUnsafeBytes { emit($0, body, crc) }
            }
        }
        return true
    }

    /// Inserts a message as (Protocol/blip.md, "Scheduling") says: normal ones at the tail; urgent ones after
    /// the last urgent message's successor, or after the last unstarted message (new messages
    /// only, so first frames keep number order), else right after the head.
    func enqueue(_ m: OutgoingMessage) {
        guard m.isUrgent, outbox.count > 1 else { outbox.append(m); return }
        var i = outbox.count - 1
        while i > 0 {
            let other = outbox[i]
            if other.isUrgent { outbox.insert(m, at: min(i + 2, outbox.count)); return }
            if !m.started && !other.started { outbox.insert(m, at: i + 1); return }
            i -= 1
        }
        outbox.insert(m, at: 1)
    }

    // MARK: Receiving

    /// Processes one received WebSocket binary message (one frame). Returns the messages it
    /// completed (requests and responses). Throws a fatal `protocolError` for bad varints,
    /// CRC, deflate data, message numbers or properties: the connection must close (1011).
    public func receive(frame bytes: UnsafeRawBufferPointer) throws(BLIPError) -> BLIPMessage? {
        guard let (number, n1) = try Varint.read(bytes, at: 0) else { throw .protocolError("frame ends inside its message number") }
        guard let (rawFlags, n2) = try Varint.read(bytes, at: n1) else { throw .protocolError("frame ends inside its flags") }
        let flags = BLIPFlags(rawValue: UInt8(truncatingIfNeeded: rawFlags))
        let headerLength = n1 + n2
        guard let type = flags.type else { return nil }   // undefined types are ignored, untouched by CRC
        if type.isAck {
            guard let (count, _) = try Varint.read(bytes, at: headerLength) else { throw .protocolError("ACK without a byte count") }
            receiveAck(type: type, number: number, count: Int(clamping: count))
            return nil
        }
        guard bytes.count >= headerLength + 4 else { throw .protocolError("frame shorter than its checksum") }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[headerLength..<(bytes.count - 4)])
        let sent = UInt32(bytes[bytes.count - 4]) << 24 | UInt32(bytes[bytes.count - 3]) << 16
            | UInt32(bytes[bytes.count - 2]) << 8 | UInt32(bytes[bytes.count - 1])
        let more = flags.contains(.moreComing)

        if !more && !flags.contains(.compressed) && partial(type, number) == nil {
            // The common case, a whole uncompressed message in one frame: parsed straight from
            // the frame, with no reassembly buffer and no table entry.
            try acceptNewMessage(type: type, number: number)
            var running = inCRC
            running.update(payload)
            inCRC = running
            guard running.value == sent else { throw .protocolError("checksum mismatch on \(type) #\(number)") }
            if payload.count > configuration.maxMessageSize + 16 {
                throw .protocolError("message #\(number) exceeds \(configuration.maxMessageSize) bytes")
            }
            let message = try IncomingMessage.parse(type: type, number: number, flags: flags, stream: payload)
            if type == .request && !message.isNoReply { owedResponses.insert(message.isUrgent, for: number) }
            return message
        }

        let msg = try incomingMessage(type: type, number: number, flags: flags)
        if flags.contains(.compressed) {
            inflated.removeAll(keepingCapacity: true)
            try inflater.decompress(payload, into: &inflated)
            try inflated.withUnsafeBytes { raw in Result { () throws(BLIPError) in try absorb(raw, into: msg) } }.get()
            // A frame inflates to at most a few times 16 KiB; do not keep a freak's buffer.
            if inflated.capacity > 256 * 1024 { inflated = [] }
        } else {
            try absorb(payload, into: msg)
        }
        guard inCRC.value == sent else { throw .protocolError("checksum mismatch on \(type) #\(number)") }
        msg.bytesReceived += payload.count + 4
        if more {
            if msg.bytesReceived - msg.bytesAcked >= BLIPConstants.ackInterval {
                // A streamed body whose reader is behind gets no ACK: its sender freezes at
                // 128,000 unacknowledged bytes until the reader catches up (sendWithheldAck).
                if let sink = msg.sink, sink.isBehind { sink.ackWithheld = true } else { acknowledge(msg) }
            }
            return nil
        }
        if type == .request { _ = incomingRequests.removeValue(forKey: number) } else { _ = incomingResponses.removeValue(forKey: number) }
        if let sink = msg.sink {
            sink.finish()
            return nil
        }
        let complete = try msg.complete()
        if type == .request && !complete.isNoReply { owedResponses.insert(complete.isUrgent, for: number) }
        return complete
    }

    /// Checksums a frame's (uncompressed) payload and appends it to the message, enforcing the
    /// message and properties size limits as the bytes arrive.
    private func absorb(_ bytes: UnsafeRawBufferPointer, into msg: IncomingMessage) throws(BLIPError) {
        inCRC.update(bytes)
        // Streamed bodies have no size limit: they are never held whole.
        if let sink = msg.sink { sink.append(bytes); return }
        if msg.count + bytes.count > configuration.maxMessageSize + 16 {
            throw .protocolError("message #\(msg.number) exceeds \(configuration.maxMessageSize) bytes")
        }
        msg.append(bytes)
        if !msg.propertiesChecked {
            // Refuse an oversized properties block as soon as its length arrives, not at the end.
            if let len = try msg.propertiesLength() {
                guard len <= UInt64(BLIPConstants.maxPropertiesSize) else { throw .protocolError("properties larger than 100 KiB") }
                msg.propertiesChecked = true
            }
        }
        if msg.propertiesChecked && !msg.offered, let openStream { try offerStream(msg, openStream) }
    }

    /// Once `msg`'s properties are in, lets the owner take its body as a stream.
    private func offerStream(_ msg: IncomingMessage, _ openStream: (BLIPMessage) -> IncomingBody?) throws(BLIPError) {
        guard let (properties, headLength) = try msg.completeHead() else { return }
        msg.offered = true
        let head = BLIPMessage(type: msg.type, number: msg.number, flags: msg.flags.subtracting(.moreComing), properties: properties)
        guard let sink = openStream(head) else { return }
        msg.sink = sink
        msg.moveBody(after: headLength, into: sink)
        // The reader may answer before the body ends (an early error, or a reply streamed
        // alongside), so the response is owed from now on.
        if msg.type == .request && !head.isNoReply { owedResponses.insert(head.isUrgent, for: msg.number) }
    }

    /// Queues an ACK of everything received of `msg`.
    private func acknowledge(_ msg: IncomingMessage) {
        msg.bytesAcked = msg.bytesReceived
        var ack: [UInt8] = []
        Varint.write(msg.number, into: &ack)
        ack.append(BLIPFlags(type: msg.type == .request ? .ackRequest : .ackResponse, [.urgent, .noReply]).rawValue)
        Varint.write(UInt64(msg.bytesReceived), into: &ack)
        acks.append(ack)
    }

    /// Sends the ACK held back while `body`'s reader was behind, if its message is still
    /// arriving. Returns whether an ACK was queued.
    @discardableResult
    func sendWithheldAck(for body: IncomingBody) -> Bool {
        guard body.ackWithheld else { return false }
        body.ackWithheld = false
        guard let msg = partial(body.type, body.number), msg.bytesReceived > msg.bytesAcked else { return false }
        acknowledge(msg)
        return true
    }

    /// The partly received message `number` of this kind, if any.
    func partial(_ type: BLIPMessageType, _ number: UInt64) -> IncomingMessage? {
        if type == .request { return incomingRequests.isEmpty ? nil : incomingRequests[number] }
        return incomingResponses.isEmpty ? nil : incomingResponses[number]
    }

    /// Checks that a frame may start message `number`: requests arrive in sequence; a response
    /// must answer a request of ours that wants one and has none yet (LiteCore's rule).
    private func acceptNewMessage(type: BLIPMessageType, number: UInt64) throws(BLIPError) {
        if type == .request {
            guard number == lastIncomingRequest &+ 1 else {
                throw .protocolError("request #\(number) out of sequence (expected #\(lastIncomingRequest &+ 1))")
            }
            lastIncomingRequest = number
        } else if awaitingResponse.removeValue(forKey: number) == nil {
            throw .protocolError("unexpected response to request #\(number)")
        }
    }

    private func incomingMessage(type: BLIPMessageType, number: UInt64, flags: BLIPFlags) throws(BLIPError) -> IncomingMessage {
        if let m = partial(type, number) { return m }
        try acceptNewMessage(type: type, number: number)
        let m = IncomingMessage(type: type, number: number, flags: flags, limit: configuration.maxMessageSize + 16,
                                reservations: bodyReservations)
        if type == .request { incomingRequests.insert(m, for: number) } else { incomingResponses.insert(m, for: number) }
        return m
    }

    private func receiveAck(type: BLIPMessageType, number: UInt64, count: Int) {
        let m = type == .ackRequest ? outgoingRequests[number] : outgoingResponses[number]
        guard let m, count <= m.bytesSent, count > m.bytesAcked else { return }
        m.bytesAcked = count
        if m.frozen && m.unacked < BLIPConstants.maxUnackedBytes {
            m.frozen = false
            if m.hasFrameReady { enqueue(m) } else { m.starved = true }
        }
    }
}
