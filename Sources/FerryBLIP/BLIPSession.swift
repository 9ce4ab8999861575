/// Limits and tuning of a BLIP session.
public struct BLIPConfiguration: Sendable {
    /// The largest message (properties + body, uncompressed) accepted. Default 64 MiB.
    public var maxMessageSize = 64 << 20
    /// The deflate level for compressed messages (0 sends them uncompressed). Default 6.
    public var compressionLevel: Int32 = 6
    /// Creates the defaults.
    public init() {}
}

/// The sans-I/O core of one BLIP 3 connection (Protocol/blip.md): fed each received WebSocket
/// binary message, it returns complete messages; asked for the next frame to send, it runs the
/// outbox scheduler (round robin, urgent insertion, 16 KiB / 4 KiB frames), compression, the
/// running CRCs and flow control (ACKs, freezing at 128,000 unacknowledged bytes). No sockets,
/// threads or clocks. Not thread-safe: one owner drives it.
public final class BLIPSession {
    /// The limits.
    public let configuration: BLIPConfiguration
    private var outbox: [OutgoingMessage] = []
    private var acks: [[UInt8]] = []
    private var outgoingRequests: [UInt64: OutgoingMessage] = [:]
    private var outgoingResponses: [UInt64: OutgoingMessage] = [:]
    private var incomingRequests: [UInt64: IncomingMessage] = [:]
    private var incomingResponses: [UInt64: IncomingMessage] = [:]
    /// Requests we sent that expect a response, by number.
    private var awaitingResponse = Set<UInt64>()
    /// Requests we received that expect a response, by number, with their urgency.
    private var owedResponses: [UInt64: Bool] = [:]
    private var nextRequestNumber: UInt64 = 1
    private var lastIncomingRequest: UInt64 = 0
    private var outCRC = BLIPChecksum()
    /// Reused for the rare frame that spans a message's properties and body.
    private var scratch: [UInt8] = []
    private var inCRC = BLIPChecksum()
    private lazy var deflater = BLIPDeflater(level: configuration.compressionLevel)
    private lazy var inflater = BLIPInflater(maxOutput: configuration.maxMessageSize + 64)

    /// Creates a session.
    public init(configuration: BLIPConfiguration = BLIPConfiguration()) {
        self.configuration = configuration
    }

    // MARK: Sending

    /// Queues a request; returns the number it goes out with (requests are numbered 1, 2, …
    /// in the order their first frames are sent).
    @discardableResult
    public func send(request: BLIPMessage) -> UInt64 {
        let number = nextRequestNumber
        nextRequestNumber += 1
        var flags = request.flags.intersection([.urgent, .compressed, .noReply])
        if configuration.compressionLevel == 0 { flags.remove(.compressed) }
        let m = OutgoingMessage(type: .request, number: number, flags: flags, message: request)
        if !flags.contains(.noReply) { awaitingResponse.insert(number) }
        outgoingRequests[number] = m
        enqueue(m)
        return number
    }

    /// Queues the response (or error response, `type: .error`) to request `number`. The
    /// response is urgent when the request was. Throws for a request that wants none or was
    /// already answered.
    public func send(response: BLIPMessage, to number: UInt64) throws(BLIPError) {
        guard let urgent = owedResponses.removeValue(forKey: number) else {
            throw .invalidRequest("no response is owed to request #\(number)")
        }
        var flags = response.flags.intersection([.compressed])
        if urgent { flags.insert(.urgent) }
        if configuration.compressionLevel == 0 { flags.remove(.compressed) }
        let type: BLIPMessageType = response.type == .error ? .error : .response
        let m = OutgoingMessage(type: type, number: number, flags: flags, message: response)
        outgoingResponses[number] = m
        enqueue(m)
    }

    /// Queues an error response to request `number`.
    public func sendError(to number: UInt64, domain: String = "BLIP", code: Int, message: String) throws(BLIPError) {
        let err = BLIPMessage(type: .error, properties: [("Error-Domain", domain), ("Error-Code", String(code))],
                              body: Array(message.utf8))
        try send(response: err, to: number)
    }

    /// Wire bytes of message frames sent so far (ACKs excluded).
    public private(set) var messageBytesSent = 0

    /// True when some outgoing message waits for an ACK before it may send more.
    public var hasFrozenMessage: Bool {
        outgoingRequests.values.contains { $0.frozen } || outgoingResponses.values.contains { $0.frozen }
    }

    /// The next frame to send as one WebSocket binary message, or nil if nothing can go now
    /// (empty queue, or every message frozen awaiting ACKs).
    public func nextFrame() throws(BLIPError) -> [UInt8]? {
        if !acks.isEmpty { return acks.removeFirst() }
        guard !outbox.isEmpty else { return nil }
        let m = outbox.removeFirst()
        let nextIsUrgent = outbox.first?.isUrgent ?? false
        let budget = (!m.isUrgent && nextIsUrgent) ? BLIPConstants.frameSizeBeforeUrgent : BLIPConstants.maxFrameSize
        var frame: [UInt8] = []
        // Room for this frame only: most messages are far smaller than the 16 KiB budget.
        frame.reserveCapacity(min(budget, m.count - m.offset + 16) + 64)
        Varint.write(m.number, into: &frame)
        let headerLength = frame.count + 1
        let take = min(m.count - m.offset, budget - headerLength - 4)
        let more = m.offset + take < m.count
        var flags = BLIPFlags(type: m.type, m.flags)
        if more { flags.insert(.moreComing) }
        frame.append(flags.rawValue)
        try m.withSlice(m.offset, take, scratch: &scratch) { (slice) throws(BLIPError) in
            outCRC.update(slice)
            if m.flags.contains(.compressed) {
                try deflater.compress(slice, into: &frame)
            } else {
                frame.append(contentsOf: slice)
            }
        }
        let crc = outCRC.value
        frame.append(contentsOf: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
        m.offset += take
        m.bytesSent += frame.count - headerLength
        messageBytesSent += frame.count
        if more {
            if m.unacked >= BLIPConstants.maxUnackedBytes { m.frozen = true } else { enqueue(m) }
        } else {
            if m.type == .request { outgoingRequests[m.number] = nil } else { outgoingResponses[m.number] = nil }
        }
        return frame
    }

    /// Inserts a message per Protocol/blip.md §2.9: normal ones at the tail; urgent ones after
    /// the last urgent message's successor, or after the last unstarted message (new messages
    /// only, so first frames keep number order), else right after the head.
    private func enqueue(_ m: OutgoingMessage) {
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

        let msg = try incomingMessage(type: type, number: number, flags: flags)
        guard let msg else { return nil }
        let before = msg.stream.count
        if flags.contains(.compressed) {
            try inflater.decompress(payload, into: &msg.stream)
        } else {
            msg.stream.append(contentsOf: payload)
        }
        msg.stream.withUnsafeBytes { inCRC.update(UnsafeRawBufferPointer(rebasing: $0[before...])) }
        guard inCRC.value == sent else { throw .protocolError("checksum mismatch on \(type) #\(number)") }
        if msg.stream.count > configuration.maxMessageSize + 16 {
            throw .protocolError("message #\(number) exceeds \(configuration.maxMessageSize) bytes")
        }
        if !msg.propertiesChecked {
            // Refuse an oversized properties block as soon as its length arrives, not at the end.
            let len: UInt64?? = try? msg.stream.withUnsafeBytes { raw in try Varint.read(raw, at: 0).map { $0.0 } }
            if case let .some(.some(l)) = len {
                guard l <= UInt64(BLIPConstants.maxPropertiesSize) else { throw .protocolError("properties larger than 100 KiB") }
                msg.propertiesChecked = true
            }
        }
        msg.bytesReceived += payload.count + 4
        let more = flags.contains(.moreComing)
        if more {
            if msg.bytesReceived - msg.bytesAcked >= BLIPConstants.ackInterval {
                msg.bytesAcked = msg.bytesReceived
                var ack: [UInt8] = []
                Varint.write(number, into: &ack)
                ack.append(BLIPFlags(type: type == .request ? .ackRequest : .ackResponse, [.urgent, .noReply]).rawValue)
                Varint.write(UInt64(msg.bytesReceived), into: &ack)
                acks.append(ack)
            }
            return nil
        }
        if type == .request { incomingRequests[number] = nil } else { incomingResponses[number] = nil }
        let complete = try msg.complete()
        if type == .request && !complete.isNoReply { owedResponses[number] = complete.isUrgent }
        return complete
    }

    private func incomingMessage(type: BLIPMessageType, number: UInt64, flags: BLIPFlags) throws(BLIPError) -> IncomingMessage? {
        if type == .request {
            if let m = incomingRequests[number] { return m }
            guard number == lastIncomingRequest + 1 else {
                throw .protocolError("request #\(number) out of sequence (expected #\(lastIncomingRequest + 1))")
            }
            lastIncomingRequest = number
            let m = IncomingMessage(type: type, number: number, flags: flags)
            incomingRequests[number] = m
            return m
        }
        if let m = incomingResponses[number] { return m }
        // A response to a NoReply, already answered or never sent request is fatal (LiteCore's rule).
        guard awaitingResponse.remove(number) != nil else {
            throw .protocolError("unexpected response to request #\(number)")
        }
        let m = IncomingMessage(type: type, number: number, flags: flags)
        incomingResponses[number] = m
        return m
    }

    private func receiveAck(type: BLIPMessageType, number: UInt64, count: Int) {
        let m = type == .ackRequest ? outgoingRequests[number] : outgoingResponses[number]
        guard let m, count <= m.bytesSent, count > m.bytesAcked else { return }
        m.bytesAcked = count
        if m.frozen && m.unacked < BLIPConstants.maxUnackedBytes {
            m.frozen = false
            enqueue(m)
        }
    }
}
