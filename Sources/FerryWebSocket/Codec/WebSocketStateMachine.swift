import CFerrySystem

/// The kind of a data message.
public enum MessageKind: Sendable, Equatable {
    /// UTF-8 text (validated before delivery).
    case text
    /// Arbitrary bytes.
    case binary
}

/// What the state machine found in the received bytes. Payload pointers are borrowed: valid
/// only during the callback.
public enum WebSocketEvent {
    /// A complete message.
    case message(MessageKind, UnsafeRawBufferPointer)
    /// A ping (a pong has already been queued).
    case ping(UnsafeRawBufferPointer)
    /// A pong.
    case pong(UnsafeRawBufferPointer)
    /// The peer's close frame arrived. `code` is nil when the frame had none (1005).
    /// If we had not sent a close, the echo has been queued.
    case closeReceived(code: CloseCode?, reason: String)
    /// The peer broke the protocol; a close frame with `error.closeCode` has been queued and
    /// further input is ignored.
    case failed(WebSocketError)
}

/// The sans-I/O core of one WebSocket connection (RFC 6455 §5–7): fed received bytes, it
/// reports events; asked to send, it writes frames to `output`. It owns framing,
/// fragmentation, masking, UTF-8 validation, limits, permessage-deflate (when negotiated) and
/// the close handshake, and nothing about sockets, threads or clocks. Not thread-safe: one
/// owner drives it.
public final class WebSocketStateMachine {
    /// Where the close handshake stands.
    public enum CloseState: Sendable, Equatable {
        /// Messages flow both ways.
        case open
        /// We sent a close frame and wait for the peer's.
        case closeSent
        /// Close frames went both ways (or we failed the connection); no more input is read.
        case closed
    }

    /// Our role.
    public let role: WebSocketRole
    /// Limits.
    public let configuration: WebSocketConfiguration
    /// permessage-deflate as negotiated in the handshake; nil when not in use.
    public let deflate: PerMessageDeflateAgreement?
    // `@exclusivity(unchecked)` on the per-frame state below: Swift's dynamic exclusivity checks
    // (a runtime call per access to a class's stored property) were the largest user-space
    // item of a small-message echo after the system calls. Safe: a state machine is used by one
    // thread at a time (its owner's), and none of these is borrowed across a call to `handle`
    // or `output` (`headerBuffer` only around the pure header parser). The buffers that are
    // borrowed across those calls (`messageBuffer`, `controlBuffer`, `scratch`, `maskPool`) keep
    // the check. The debug test suite ran with all checks on before they were turned off.
    /// Receives every byte to send, in order.
    @exclusivity(unchecked) public var output: (UnsafeRawBufferPointer) -> Void
    /// Where the close handshake stands.
    @exclusivity(unchecked) public private(set) var closeState = CloseState.open
    /// The close code and reason we sent, once we have.
    @exclusivity(unchecked) public private(set) var sentClose: (code: CloseCode?, reason: String)?

    private enum ReadState {
        case header
        case payload(FrameHeader, remaining: Int, phase: Int)
    }
    @exclusivity(unchecked) private var readState = ReadState.header
    @exclusivity(unchecked) private var headerBuffer: [UInt8] = []
    private var controlBuffer: [UInt8] = []
    /// The data message being assembled (fragmented, or a frame split across reads).
    private var messageBuffer: [UInt8] = []
    /// Bytes of `messageBuffer` written so far when it was sized up front for a whole masked,
    /// unfragmented frame split across reads (its payload is unmasked straight into it), else nil.
    @exclusivity(unchecked) private var directFill: Int?
    @exclusivity(unchecked) private var messageKind: MessageKind?
    @exclusivity(unchecked) private var messageFragmented = false
    @exclusivity(unchecked) private var messageSize = 0
    @exclusivity(unchecked) private var utf8 = UTF8Validator()
    private var scratch: [UInt8] = []
    private var maskPool: [UInt8] = []
    @exclusivity(unchecked) private var maskPoolIndex = 0
    @exclusivity(unchecked) private var sendingFragmented = false
    /// RSV1 (4) when permessage-deflate is negotiated, else 0.
    private let allowedRSV: UInt8
    /// The message being received is compressed (its first frame had RSV1).
    @exclusivity(unchecked) private var messageCompressed = false
    /// The fragmented message being sent is compressed.
    @exclusivity(unchecked) private var sendingCompressed = false
    private let deflater: MessageDeflater?
    /// Internal for the decompression-bomb test.
    let inflater: MessageInflater?

    /// Creates a state machine. `output` receives the bytes to send. With `deflate` (the
    /// outcome of the handshake), messages are compressed and RSV1 frames are inflated.
    public init(role: WebSocketRole, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                deflate: PerMessageDeflateAgreement? = nil,
                output: @escaping (UnsafeRawBufferPointer) -> Void) {
        self.role = role
        self.configuration = configuration
        self.output = output
        self.deflate = deflate
        if let d = deflate {
            allowedRSV = 4
            // If zlib cannot allocate, we send uncompressed (allowed per message) and fail
            // compressed input with 1007.
            deflater = MessageDeflater(level: d.compressionLevel, windowBits: d.sendMaxWindowBits,
                                       memoryLevel: d.memoryLevel, noContextTakeover: d.sendNoContextTakeover)
            inflater = MessageInflater(windowBits: d.receiveMaxWindowBits, noContextTakeover: d.receiveNoContextTakeover,
                                       maxMessageSize: configuration.maxMessageSize)
        } else {
            allowedRSV = 0
            deflater = nil
            inflater = nil
        }
    }

    // MARK: Receiving

    /// Processes received bytes, calling `handle` for each event. The bytes are modified in
    /// place (unmasked). Returns when all bytes are consumed or the input is finished.
    public func receive(_ bytes: UnsafeMutableRawBufferPointer, _ handle: (WebSocketEvent) -> Void) {
        guard let base = bytes.baseAddress else { return }
        let n = bytes.count
        var p = 0
        while p < n && closeState != .closed {
            switch readState {
            case .header:
                let parsed: (FrameHeader, Int)?
                var consumed: Int
                do throws(WebSocketError) {
                    if headerBuffer.isEmpty {
                        parsed = try FrameHeaderParser.parse(UnsafeRawBufferPointer(start: base + p, count: n - p),
                                                             role: role, allowedRSV: allowedRSV,
                                                             maxFrameSize: configuration.maxFrameSize)
                        consumed = parsed?.1 ?? 0
                    } else {
                        let old = headerBuffer.count
                        let take = min(FrameEncoder.maxHeaderLength - old, n - p)
                        headerBuffer.append(contentsOf: UnsafeRawBufferPointer(start: base + p, count: take))
                        let role = role, maxFrame = configuration.maxFrameSize, rsv = allowedRSV
                        parsed = try headerBuffer.withUnsafeBytes { raw in
                            Result { () throws(WebSocketError) in
                                try FrameHeaderParser.parse(raw, role: role, allowedRSV: rsv, maxFrameSize: maxFrame)
                            }
                        }.get()
                        consumed = parsed.map { $0.1 - old } ?? take
                    }
                } catch {
                    fail(error, handle)
                    return
                }
                guard let (header, _) = parsed else {
                    if headerBuffer.isEmpty {
                        headerBuffer.append(contentsOf: UnsafeRawBufferPointer(start: base + p, count: n - p))
                    }
                    return
                }
                headerBuffer.removeAll(keepingCapacity: true)
                p += consumed
                if let error = beginFrame(header) { fail(error, handle); return }
                let len = header.payloadLength
                if n - p >= len {
                    // Fast path: the whole payload is here; unmask in place, deliver without copying.
                    let payload = UnsafeMutableRawBufferPointer(start: base + p, count: len)
                    if let k = header.maskKey { Masking.apply(key: k, to: payload) }
                    p += len
                    completeFrame(header, UnsafeRawBufferPointer(payload), handle)
                } else {
                    // One allocation for the whole payload instead of doubling as reads arrive.
                    // A masked message in one frame gets the buffer at its full size, and each
                    // piece is unmasked into it as it is copied: one pass over the bytes, not an
                    // in-place unmask and then a copy (the payload is within the size limits
                    // `beginFrame` checked).
                    if (header.opcode == .text || header.opcode == .binary) && header.fin && !messageCompressed
                        && header.maskKey != nil && messageBuffer.isEmpty && len > 0 {
                        messageBuffer = [UInt8](unsafeUninitializedCapacity: len) { _, count in count = len }
                        directFill = 0
                    } else if !header.opcode.isControl && !messageCompressed {
                        messageBuffer.reserveCapacity(messageBuffer.count + len)
                    }
                    readState = .payload(header, remaining: len, phase: 0)
                }
            case .payload(let header, let remaining, let phase):
                let take = min(remaining, n - p)
                let chunk = UnsafeMutableRawBufferPointer(start: base + p, count: take)
                var nextPhase = phase
                p += take
                if let fill = directFill, let k = header.maskKey {
                    guard absorbUnmasking(UnsafeRawBufferPointer(chunk), key: k, phase: phase, at: fill) else {
                        fail(.invalidUTF8, handle); return
                    }
                    nextPhase = (phase + take) & 3
                } else {
                    if let k = header.maskKey { nextPhase = Masking.apply(key: k, to: chunk, phase: phase) }
                    if let error = absorbPartial(header, UnsafeRawBufferPointer(chunk)) { fail(error, handle); return }
                }
                if take == remaining {
                    readState = .header
                    completeBufferedFrame(header, handle)
                } else {
                    readState = .payload(header, remaining: remaining - take, phase: nextPhase)
                }
            }
        }
    }

    /// Checks a new frame against the message-level rules; returns the error to fail with.
    private func beginFrame(_ h: FrameHeader) -> WebSocketError? {
        switch h.opcode {
        case .continuation:
            guard messageKind != nil else { return .protocolError("continuation frame without a message to continue") }
            // RFC 7692 §6.1: RSV1 marks the first frame of a compressed message only.
            if h.rsv != 0 { return .protocolError("RSV1 on a continuation frame") }
        case .text, .binary:
            if messageKind != nil { return .protocolError("new message before the fragmented one ended") }
            messageKind = h.opcode == .text ? .text : .binary
            messageFragmented = !h.fin
            messageCompressed = h.rsv != 0
            messageSize = 0
            utf8 = UTF8Validator()
        default:
            return nil
        }
        messageSize += h.payloadLength
        if messageSize > configuration.maxMessageSize { return .messageTooBig(limit: configuration.maxMessageSize) }
        return nil
    }

    /// Takes part of a frame's payload that arrived before the rest.
    private func absorbPartial(_ h: FrameHeader, _ chunk: UnsafeRawBufferPointer) -> WebSocketError? {
        if h.opcode.isControl {
            controlBuffer.append(contentsOf: chunk)
            return nil
        }
        if messageCompressed { return inflate(chunk) }
        if messageKind == .text && !utf8.validate(chunk) { return .invalidUTF8 }
        messageBuffer.append(contentsOf: chunk)
        return nil
    }

    /// Unmasks part of a one-frame message's payload into `messageBuffer` at `offset` (see
    /// `directFill`); false if it is text that is not UTF-8 so far.
    private func absorbUnmasking(_ chunk: UnsafeRawBufferPointer, key: (UInt8, UInt8, UInt8, UInt8), phase: Int,
                                 at offset: Int) -> Bool {
        directFill = offset + chunk.count
        return messageBuffer.withUnsafeMutableBytes { dst -> Bool in
            // The buffer was sized for the whole payload, of which `chunk` is the next part.
            guard let base = dst.baseAddress, offset + chunk.count <= dst.count else { return false }
            Masking.copy(key: key, from: chunk, to: base + offset, phase: phase)
            return messageKind != .text || utf8.validate(UnsafeRawBufferPointer(start: base + offset, count: chunk.count))
        }
    }

    private func completeBufferedFrame(_ h: FrameHeader, _ handle: (WebSocketEvent) -> Void) {
        if h.opcode.isControl {
            let buf = controlBuffer
            controlBuffer.removeAll(keepingCapacity: true)
            buf.withUnsafeBytes { handleControl(h.opcode, $0, handle) }
        } else if h.fin {
            finishMessage(handle)
        }
    }

    /// A frame whose whole payload is in the read buffer.
    private func completeFrame(_ h: FrameHeader, _ payload: UnsafeRawBufferPointer, _ handle: (WebSocketEvent) -> Void) {
        if h.opcode.isControl {
            handleControl(h.opcode, payload, handle)
            return
        }
        guard let kind = messageKind else { return }
        if messageCompressed {
            if let error = inflate(payload) { fail(error, handle); return }
            if h.fin { finishMessage(handle) }
            return
        }
        if kind == .text && !utf8.validate(payload) { fail(.invalidUTF8, handle); return }
        if h.fin && messageBuffer.isEmpty {
            if kind == .text && !utf8.isComplete { fail(.invalidUTF8, handle); return }
            messageKind = nil
            handle(.message(kind, payload))
            return
        }
        messageBuffer.append(contentsOf: payload)
        if h.fin { finishMessage(handle) }
    }

    /// Inflates compressed payload bytes into the inflater's message buffer, validating the
    /// UTF-8 of text as it comes out.
    private func inflate(_ chunk: UnsafeRawBufferPointer) -> WebSocketError? {
        guard let inflater else { return .invalidCompressedData("inflate unavailable") }
        do {
            let fresh = try inflater.inflate(chunk)
            if messageKind == .text && !utf8.validate(fresh) { return .invalidUTF8 }
        } catch {
            return error
        }
        return nil
    }

    private func finishCompressedMessage(_ kind: MessageKind, _ handle: (WebSocketEvent) -> Void) {
        guard let inflater else { fail(.invalidCompressedData("inflate unavailable"), handle); return }
        do {
            let fresh = try inflater.finish()
            if kind == .text && !(utf8.validate(fresh) && utf8.isComplete) { fail(.invalidUTF8, handle); return }
        } catch {
            fail(error, handle)
            return
        }
        messageKind = nil
        messageCompressed = false
        handle(.message(kind, inflater.message))
        inflater.endMessage()
    }

    private func finishMessage(_ handle: (WebSocketEvent) -> Void) {
        guard let kind = messageKind else { return }
        if messageCompressed { finishCompressedMessage(kind, handle); return }
        if kind == .text && !utf8.isComplete { fail(.invalidUTF8, handle); return }
        messageKind = nil
        directFill = nil
        messageBuffer.withUnsafeBytes { handle(.message(kind, $0)) }
        // Keep a modest buffer for the next message; give large ones back.
        messageBuffer.removeAll(keepingCapacity: messageBuffer.capacity <= 64 * 1024)
    }

    private func handleControl(_ op: Opcode, _ payload: UnsafeRawBufferPointer, _ handle: (WebSocketEvent) -> Void) {
        switch op {
        case .ping:
            if closeState == .open { writeFrame(.pong, payload, fin: true) }
            handle(.ping(payload))
        case .pong:
            handle(.pong(payload))
        case .close:
            var code: CloseCode?
            var reason = ""
            if payload.count == 1 { fail(.protocolError("close frame with a 1-byte payload"), handle); return }
            if payload.count >= 2 {
                let c = CloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
                if !c.isValidOnWire { fail(.protocolError("invalid close code \(c.rawValue)"), handle); return }
                let r = UnsafeRawBufferPointer(rebasing: payload[2...])
                if !UTF8Validator.isValid(r) { fail(.invalidUTF8, handle); return }
                code = c
                reason = String(decoding: r, as: UTF8.self)
            }
            if closeState == .open {
                sentClose = (code, "")
                let echo = FrameEncoder.closePayload(code: code, reason: "")
                echo.withUnsafeBytes { writeFrame(.close, $0, fin: true) }
            }
            closeState = .closed
            handle(.closeReceived(code: code, reason: reason))
        default:
            break
        }
    }

    private func fail(_ error: WebSocketError, _ handle: (WebSocketEvent) -> Void) {
        if closeState == .open {
            let reason: String
            switch error {
            case .invalidUTF8: reason = "invalid UTF-8"
            case .messageTooBig: reason = "message too big"
            case .invalidCompressedData: reason = "invalid compressed data"
            default: reason = "protocol error"
            }
            sendClose(code: error.closeCode, reason: reason)
        }
        closeState = .closed
        readState = .header
        messageBuffer = []
        directFill = nil
        handle(.failed(error))
    }

    // MARK: Sending

    /// Sends a whole message as one frame; compressed (RSV1) when permessage-deflate is on and
    /// the message is at least `minimumSize` bytes.
    public func send(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer) {
        let op: Opcode = kind == .text ? .text : .binary
        if let deflater, let d = deflate, payload.count >= d.minimumSize, closeState == .open {
            writeFrame(op, deflater.compress(payload, final: true), fin: true, rsv: 4)
            if payload.count > 64 * 1024 { deflater.trim() }
        } else {
            writeFrame(op, payload, fin: true)
        }
    }

    /// Sends one fragment of a message: the first fragment carries `kind`, later ones are
    /// continuations; `fin` ends the message. Control frames may be sent between fragments.
    /// With permessage-deflate each fragment is compressed with a sync flush (the message's
    /// first frame carries RSV1; only the last fragment loses the `00 00 FF FF` trailer).
    public func sendFragment(_ kind: MessageKind, _ payload: UnsafeRawBufferPointer, fin: Bool) {
        let first = !sendingFragmented
        let op: Opcode = first ? (kind == .text ? .text : .binary) : .continuation
        sendingFragmented = !fin
        if first { sendingCompressed = deflater != nil }
        if sendingCompressed, let deflater, closeState == .open {
            writeFrame(op, deflater.compress(payload, final: fin), fin: fin, rsv: first ? 4 : 0)
            if fin && payload.count > 64 * 1024 { deflater.trim() }
        } else {
            writeFrame(op, payload, fin: fin)
        }
    }

    /// Sends a ping (payload ≤ 125 bytes; longer payloads are truncated).
    public func sendPing(_ payload: UnsafeRawBufferPointer) {
        writeFrame(.ping, UnsafeRawBufferPointer(rebasing: payload.prefix(125)), fin: true)
    }

    /// Sends an unsolicited pong (a heartbeat that expects no answer).
    public func sendPong(_ payload: UnsafeRawBufferPointer) {
        writeFrame(.pong, UnsafeRawBufferPointer(rebasing: payload.prefix(125)), fin: true)
    }

    /// Starts the close handshake. `code` nil sends an empty close frame. No effect once a
    /// close frame was sent.
    public func sendClose(code: CloseCode?, reason: String = "") {
        guard closeState == .open else { return }
        sentClose = (code, reason)
        let payload = FrameEncoder.closePayload(code: code, reason: reason)
        payload.withUnsafeBytes { writeFrame(.close, $0, fin: true) }
        closeState = .closeSent
    }

    /// Sends a message whose payload is `head`, `body` and `tail` one after the other, without
    /// joining them first: a framing layer above (BLIP) passes its frame header, a slice of the
    /// message it holds and its checksum, and saves copying the slice into a frame buffer. With
    /// permessage-deflate the three are joined and compressed as one payload.
    public func send(_ kind: MessageKind, head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer,
                     tail: UnsafeRawBufferPointer) {
        let op: Opcode = kind == .text ? .text : .binary
        let total = head.count + body.count + tail.count
        if deflater != nil, let d = deflate, total >= d.minimumSize, closeState == .open {
            var joined: [UInt8] = []
            joined.reserveCapacity(total)
            joined.append(contentsOf: head); joined.append(contentsOf: body); joined.append(contentsOf: tail)
            joined.withUnsafeBytes { send(kind, $0) }
            return
        }
        writeFrame(op, head, body, tail, fin: true, rsv: 0)
    }

    /// Writes one frame; masks (clients) into a scratch buffer so the caller's bytes stay intact.
    /// `rsv` sets reserved bits (RSV1 = 4 marks a compressed message's first frame).
    public func writeFrame(_ op: Opcode, _ payload: UnsafeRawBufferPointer, fin: Bool, rsv: UInt8 = 0) {
        writeFrame(op, payload, UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0),
                   fin: fin, rsv: rsv)
    }

    /// Writes one frame whose payload is the three parts in order.
    private func writeFrame(_ op: Opcode, _ p0: UnsafeRawBufferPointer, _ p1: UnsafeRawBufferPointer,
                            _ p2: UnsafeRawBufferPointer, fin: Bool, rsv: UInt8) {
        // Once a close frame is sent (ours or the echo, both written while still open) nothing follows it.
        guard closeState == .open else { return }
        let total = p0.count + p1.count + p2.count
        let key = role == .client ? nextMaskKey() : nil
        let header = FrameHeader(fin: fin, rsv: rsv, opcode: op, maskKey: key, payloadLength: total)
        // Room for a short first part behind the header, so that header and part go to `output`
        // as one piece (BLIP's frame start is a few bytes).
        withUnsafeTemporaryAllocation(byteCount: FrameEncoder.maxHeaderLength + Self.joinedPart, alignment: 8) { h in
            let hn = FrameEncoder.writeHeader(header, into: h)
            if let key {
                // Masked into a scratch buffer (the caller's bytes stay intact): header and
                // payload in one piece when small; a large payload in 64 KiB pieces through the
                // same buffer, so no frame-sized allocation per message.
                let want = min(hn + total, hn + Self.maskPiece)
                if scratch.count < want { scratch = [UInt8](repeating: 0, count: want) }
                var k = key
                withUnsafeBytes(of: &k) { kb in
                    let kp = kb.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    scratch.withUnsafeMutableBytes { s in
                        let base = s.baseAddress!
                        base.copyMemory(from: h.baseAddress!, byteCount: hn)
                        var filled = hn, phase = 0
                        for i in 0..<3 {
                            let part = i == 0 ? p0 : (i == 1 ? p1 : p2)
                            guard let src = part.baseAddress else { continue }
                            var offset = 0
                            while offset < part.count {
                                let n = min(s.count - filled, part.count - offset)
                                phase = ferry_mask_copy((base + filled).assumingMemoryBound(to: UInt8.self),
                                                        (src + offset).assumingMemoryBound(to: UInt8.self), n, kp, phase)
                                offset += n
                                filled += n
                                if filled == s.count {
                                    output(UnsafeRawBufferPointer(start: base, count: filled))
                                    filled = 0
                                }
                            }
                        }
                        if filled > 0 { output(UnsafeRawBufferPointer(start: base, count: filled)) }
                    }
                }
            } else if p0.count <= Self.joinedPart, let b = p0.baseAddress {
                (h.baseAddress! + hn).copyMemory(from: b, byteCount: p0.count)
                output(UnsafeRawBufferPointer(start: h.baseAddress, count: hn + p0.count))
                if p1.count > 0 { output(p1) }
                if p2.count > 0 { output(p2) }
            } else {
                output(UnsafeRawBufferPointer(start: h.baseAddress, count: hn))
                if p0.count > 0 { output(p0) }
                if p1.count > 0 { output(p1) }
                if p2.count > 0 { output(p2) }
            }
        }
    }

    /// The longest first part copied behind the header (unmasked frames).
    static let joinedPart = 128

    /// The largest piece of a masked payload handed to `output` at once.
    static let maskPiece = 64 * 1024

    /// Masking keys come from the kernel CSPRNG, fetched 4 KiB at a time.
    private func nextMaskKey() -> (UInt8, UInt8, UInt8, UInt8) {
        if maskPoolIndex + 4 > maskPool.count {
            if maskPool.isEmpty { maskPool = [UInt8](repeating: 0, count: 4096) }
            if ferry_random_bytes(&maskPool, maskPool.count) != 0 {
                for i in maskPool.indices { maskPool[i] = UInt8.random(in: 0...255) }
            }
            maskPoolIndex = 0
        }
        defer { maskPoolIndex += 4 }
        return (maskPool[maskPoolIndex], maskPool[maskPoolIndex + 1], maskPool[maskPoolIndex + 2], maskPool[maskPoolIndex + 3])
    }

    /// Marks the connection finished (the transport closed); input is ignored from now on.
    public func markClosed() { closeState = .closed }
}
