/// The byte buffer and body framing both decoders share (Protocol/http.md, "Requests" and
/// "Responses"): it finds the end of a head, then delimits the body by `Content-Length`, by
/// chunks (RFC 9112 §7.1; trailers read and dropped) or by the end of the connection, within
/// `HTTPLimits`. What a head means is the decoders' business; this only moves through bytes.
struct HTTPMessageReader: Sendable {
    /// How the current message's body is delimited.
    enum Framing: Sendable, Equatable {
        /// No body.
        case none
        /// Exactly this many bytes.
        case length(Int)
        /// Chunked transfer coding.
        case chunked
        /// Everything until the peer closes (a response without length or chunking).
        case untilClose
    }

    /// One step through a body.
    enum BodyStep: Sendable, Equatable {
        /// More bytes are needed.
        case needMore
        /// A piece of the body.
        case piece([UInt8])
        /// Framing bytes were consumed; step again.
        case progressed
        /// The body is complete.
        case end
    }

    private enum State: Sendable, Equatable {
        case head
        case fixed(remaining: Int)
        case untilClose
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers(size: Int)
    }

    let limits: HTTPLimits
    /// The largest body accepted for the current message (`limits.maxBodySize` unless the
    /// decoder sets another for one message).
    var maxBodySize: Int
    /// Names the side in error messages: "request" or "response".
    let noun: String
    private var state = State.head
    private var buffer: [UInt8] = []
    /// Where the unconsumed bytes of `buffer` begin.
    private var start = 0
    /// Where the search for the end of a head resumes.
    private var scanFrom = 0
    /// Body bytes of the current message so far (for the limit on chunked and until-close bodies).
    private var bodyReceived = 0

    init(limits: HTTPLimits, noun: String) {
        self.limits = limits
        self.noun = noun
        maxBodySize = limits.maxBodySize
    }

    /// Whether no message is in progress and nothing is buffered.
    var isIdle: Bool { state == .head && start == buffer.count }
    /// Whether a head is awaited (the previous message, if any, is complete).
    var awaitsHead: Bool { state == .head }
    /// Whether the current body runs until the connection ends.
    var readsUntilClose: Bool { state == .untilClose }

    private var available: Int { buffer.count - start }

    mutating func append(_ bytes: some Collection<UInt8>) { buffer.append(contentsOf: bytes) }

    /// Drops what was consumed, so the buffer holds only what is still to be read.
    mutating func compact() {
        if start > 0 {
            buffer.removeFirst(start)
            scanFrom = max(0, scanFrom - start)
            start = 0
        }
    }

    /// The bytes not consumed yet, handed over (the connection changes protocol).
    mutating func takeUnread() -> [UInt8] {
        defer { reset() }
        return Array(buffer[start...])
    }

    /// Forgets everything (after a failure).
    mutating func reset() {
        buffer = []
        start = 0
        scanFrom = 0
        state = .head
    }

    /// The next complete head without its final CRLF CRLF (empty lines before it skipped, as
    /// RFC 9112 §2.2 allows), or nil when more bytes are needed.
    mutating func nextHead() throws(HTTPError) -> ArraySlice<UInt8>? {
        while available >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 { start += 2 }
        scanFrom = max(scanFrom, start)
        guard let end = find(crlfcrlf: scanFrom) else {
            if available > limits.maxHeadSize { throw tooLargeHead() }
            scanFrom = max(start, buffer.count - 3)
            return nil
        }
        guard end - start <= limits.maxHeadSize else { throw tooLargeHead() }
        let head = buffer[start..<end - 4]
        start = end
        scanFrom = end
        return head
    }

    /// Starts reading a body framed so; `.none` and `.length(0)` end at once.
    mutating func beginBody(_ framing: Framing) {
        bodyReceived = 0
        switch framing {
        case .none, .length(0): state = .head
        case .length(let n): state = .fixed(remaining: n)
        case .chunked: state = .chunkSize
        case .untilClose: state = .untilClose
        }
    }

    /// Whether `beginBody(framing)` left a body to read.
    static func hasBody(_ framing: Framing) -> Bool { framing != .none && framing != .length(0) }

    /// Advances through the current body by one step.
    mutating func stepBody() throws(HTTPError) -> BodyStep {
        switch state {
        case .head:
            return .end
        case .fixed(let remaining):
            let n = min(remaining, available)
            guard n > 0 else { return .needMore }
            let piece = take(n)
            state = n == remaining ? .head : .fixed(remaining: remaining - n)
            return .piece(piece)
        case .untilClose:
            guard available > 0 else { return .needMore }
            guard available <= maxBodySize - bodyReceived else { throw tooLargeBody() }
            bodyReceived += available
            return .piece(take(available))
        case .chunkSize:
            guard let lineEnd = find(crlf: start) else {
                if available > limits.maxChunkLineSize { throw HTTPError.malformed("chunk-size line too long") }
                return .needMore
            }
            guard lineEnd - start <= limits.maxChunkLineSize else { throw HTTPError.malformed("chunk-size line too long") }
            let size = try Self.chunkSize(buffer[start..<lineEnd - 2])
            start = lineEnd
            if size == 0 {
                state = .trailers(size: 0)
                return .progressed
            }
            guard size <= maxBodySize - bodyReceived else { throw tooLargeBody() }
            state = .chunkData(remaining: size)
            return .progressed
        case .chunkData(let remaining):
            let n = min(remaining, available)
            guard n > 0 else { return .needMore }
            bodyReceived += n
            state = n == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - n)
            return .piece(take(n))
        case .chunkDataEnd:
            guard available >= 2 else { return .needMore }
            guard buffer[start] == 13 && buffer[start + 1] == 10 else { throw HTTPError.malformed("chunk data not followed by CRLF") }
            start += 2
            state = .chunkSize
            return .progressed
        case .trailers(let size):
            // Trailer fields are read and dropped (Ferry acts on none), within a size limit.
            guard let lineEnd = find(crlf: start) else {
                if size + available > limits.maxHeadSize { throw HTTPError(status: 431, reason: "trailer section too large") }
                return .needMore
            }
            let length = lineEnd - start
            guard size + length <= limits.maxHeadSize else { throw HTTPError(status: 431, reason: "trailer section too large") }
            start = lineEnd
            if length == 2 {
                state = .head
                return .end
            }
            state = .trailers(size: size + length)
            return .progressed
        }
    }

    /// The connection ended: completes an until-close body; anything else unfinished is an error.
    mutating func finish() throws(HTTPError) -> Bool {
        switch state {
        case .untilClose:
            state = .head
            return true
        case .head:
            return false
        default:
            throw HTTPError.malformed("the connection closed in the middle of a \(noun) body")
        }
    }

    private mutating func take(_ n: Int) -> [UInt8] {
        defer { start += n }
        return Array(buffer[start..<start + n])
    }

    private func tooLargeHead() -> HTTPError {
        HTTPError(status: 431, reason: "\(noun) head larger than \(limits.maxHeadSize) bytes")
    }

    private func tooLargeBody() -> HTTPError {
        HTTPError(status: 413, reason: "\(noun) body larger than \(maxBodySize) bytes")
    }

    /// The index just past the first CRLF CRLF at or after `from`.
    private func find(crlfcrlf from: Int) -> Int? {
        var i = from
        while i + 3 < buffer.count {
            if buffer[i + 3] == 10 && buffer[i + 2] == 13 && buffer[i + 1] == 10 && buffer[i] == 13 { return i + 4 }
            i += 1
        }
        return nil
    }

    /// The index just past the first CRLF at or after `from`.
    private func find(crlf from: Int) -> Int? {
        var i = from
        while i + 1 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 { return i + 2 }
            i += 1
        }
        return nil
    }

    /// A chunk-size line's size (hex digits, then optional `;extensions`, ignored).
    static func chunkSize(_ line: ArraySlice<UInt8>) throws(HTTPError) -> Int {
        var size = 0
        var digits = 0
        for b in line {
            let v: Int
            switch b {
            case 0x30...0x39: v = Int(b - 0x30)
            case 0x41...0x46: v = Int(b - 0x41 + 10)
            case 0x61...0x66: v = Int(b - 0x61 + 10)
            case UInt8(ascii: ";"), UInt8(ascii: " "), UInt8(ascii: "\t"):
                guard digits > 0 else { throw HTTPError.malformed("chunk size missing") }
                return size
            default:
                throw HTTPError.malformed("invalid chunk size")
            }
            digits += 1
            // Fifteen hex digits stay far inside Int; more is no body anyone sends.
            guard digits <= 15 else { throw HTTPError(status: 413, reason: "chunk size too large") }
            size = size << 4 | v
        }
        guard digits > 0 else { throw HTTPError.malformed("chunk size missing") }
        return size
    }
}
