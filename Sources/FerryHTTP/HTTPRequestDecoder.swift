/// Decodes the requests an HTTP/1.x client sends on one connection (Protocol/http.md,
/// "Requests"): bytes in, events out — a head, the body in pieces as they arrive, the end —
/// for any number of pipelined requests. Sans-I/O: it never reads or writes a socket.
///
/// Every limit in `HTTPLimits` is enforced before bytes are buffered past it. A request that
/// breaks the protocol throws an `HTTPError` naming the status to answer with; the decoder then
/// stays failed (the connection must be closed: where the next request starts is unknown).
/// Framing follows RFC 9112 §6 strictly, so a request cannot be read two ways: a request with
/// both `Transfer-Encoding` and `Content-Length`, or with differing `Content-Length` values, is
/// refused.
public struct HTTPRequestDecoder: Sendable {
    /// What the decoder read.
    public enum Event: Sendable, Equatable {
        /// A request's head. Its body, if any, follows.
        case head(HTTPRequestHead)
        /// The next piece of the current request's body (de-chunked).
        case body([UInt8])
        /// The current request is complete; the next event, if any, is the next request's head.
        case end
    }

    private enum State: Sendable, Equatable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers(size: Int)
        case failed
    }

    /// The limits in force.
    public let limits: HTTPLimits
    private var state = State.head
    private var buffer: [UInt8] = []
    /// Where the unconsumed bytes of `buffer` begin.
    private var start = 0
    /// Where the search for the end of a head resumes.
    private var scanFrom = 0
    /// Body bytes of the current request so far (for the chunked limit).
    private var bodyReceived = 0

    /// A decoder with these limits.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
    }

    /// Whether the decoder is between requests with nothing buffered (a connection may be
    /// closed for idleness only then).
    public var isIdle: Bool { state == .head && start == buffer.count }

    /// Takes the next bytes from the connection; returns the events they complete.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(HTTPError) -> [Event] {
        guard state != .failed else { throw HTTPError.malformed("the connection already failed") }
        buffer.append(contentsOf: bytes)
        var events: [Event] = []
        do throws(HTTPError) {
            while try step(&events) {}
        } catch {
            state = .failed
            buffer = []
            start = 0
            throw error
        }
        // Drop what was consumed, so the buffer holds only what is still to be read.
        if start > 0 {
            buffer.removeFirst(start)
            scanFrom = max(0, scanFrom - start)
            start = 0
        }
        return events
    }

    private var available: Int { buffer.count - start }

    /// Advances by one step; false when more bytes are needed.
    private mutating func step(_ events: inout [Event]) throws(HTTPError) -> Bool {
        switch state {
        case .failed:
            return false
        case .head:
            // RFC 9112 §2.2: empty lines before a request line are ignored.
            while available >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 { start += 2 }
            scanFrom = max(scanFrom, start)
            guard let end = find(crlfcrlf: scanFrom) else {
                if available > limits.maxHeadSize {
                    throw HTTPError(status: 431, reason: "request head larger than \(limits.maxHeadSize) bytes")
                }
                scanFrom = max(start, buffer.count - 3)
                return false
            }
            guard end - start <= limits.maxHeadSize else {
                throw HTTPError(status: 431, reason: "request head larger than \(limits.maxHeadSize) bytes")
            }
            let head = try HTTPHeadReader.parse(buffer[start..<end - 4], limits: limits)
            start = end
            scanFrom = end
            bodyReceived = 0
            events.append(.head(head))
            switch head.body {
            case .none, .length(0):
                events.append(.end)
            case .length(let n):
                state = .fixed(remaining: n)
            case .chunked:
                state = .chunkSize
            }
            return true
        case .fixed(let remaining):
            let n = takeBody(upTo: remaining, into: &events)
            guard n > 0 else { return false }
            if n == remaining {
                events.append(.end)
                state = .head
            } else {
                state = .fixed(remaining: remaining - n)
            }
            return true
        case .chunkSize:
            guard let lineEnd = find(crlf: start) else {
                if available > limits.maxChunkLineSize { throw HTTPError.malformed("chunk-size line too long") }
                return false
            }
            guard lineEnd - start <= limits.maxChunkLineSize else { throw HTTPError.malformed("chunk-size line too long") }
            let size = try Self.chunkSize(buffer[start..<lineEnd - 2])
            start = lineEnd
            if size == 0 {
                state = .trailers(size: 0)
                return true
            }
            guard size <= limits.maxBodySize - bodyReceived else {
                throw HTTPError(status: 413, reason: "request body larger than \(limits.maxBodySize) bytes")
            }
            state = .chunkData(remaining: size)
            return true
        case .chunkData(let remaining):
            let n = takeBody(upTo: remaining, into: &events)
            guard n > 0 else { return false }
            bodyReceived += n
            state = n == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - n)
            return true
        case .chunkDataEnd:
            guard available >= 2 else { return false }
            guard buffer[start] == 13 && buffer[start + 1] == 10 else { throw HTTPError.malformed("chunk data not followed by CRLF") }
            start += 2
            state = .chunkSize
            return true
        case .trailers(let size):
            // Trailer fields are read and dropped (Ferry acts on none), within a size limit.
            guard let lineEnd = find(crlf: start) else {
                if size + available > limits.maxHeadSize { throw HTTPError(status: 431, reason: "trailer section too large") }
                return false
            }
            let length = lineEnd - start
            guard size + length <= limits.maxHeadSize else { throw HTTPError(status: 431, reason: "trailer section too large") }
            start = lineEnd
            if length == 2 {
                events.append(.end)
                state = .head
            } else {
                state = .trailers(size: size + length)
            }
            return true
        }
    }

    /// Emits up to `limit` buffered body bytes as one piece; returns how many.
    private mutating func takeBody(upTo limit: Int, into events: inout [Event]) -> Int {
        let n = min(limit, available)
        if n > 0 {
            events.append(.body(Array(buffer[start..<start + n])))
            start += n
        }
        return n
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
