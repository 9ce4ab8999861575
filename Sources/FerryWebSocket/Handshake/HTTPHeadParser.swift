/// Accumulates bytes until a complete HTTP/1.1 head (`\r\n\r\n`) and parses it, with a size
/// limit so a peer cannot make us buffer without bound. Sans-I/O: fed bytes, returns heads.
@_spi(Fuzzing) public struct HTTPHeadParser: Sendable {
    private var buffer: [UInt8] = []
    private var scanFrom = 0
    /// The largest head accepted, in bytes.
    public let maxSize: Int

    /// Creates a parser with a head-size limit.
    public init(maxSize: Int = 16 * 1024) { self.maxSize = maxSize }

    /// Bytes buffered so far.
    public var bufferedCount: Int { buffer.count }

    /// Appends bytes. Returns the head bytes and whatever followed them once the head is
    /// complete, nil while it is not. Throws `.headerTooLarge` past the limit.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(WebSocketError) -> (head: [UInt8], rest: [UInt8])? {
        buffer.append(contentsOf: bytes)
        var i = max(0, scanFrom - 3)
        while i + 3 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                let end = i + 4
                if end > maxSize { throw .headerTooLarge(limit: maxSize) }
                let head = Array(buffer[..<end])
                let rest = Array(buffer[end...])
                buffer = []; scanFrom = 0
                return (head, rest)
            }
            i += 1
        }
        scanFrom = buffer.count
        if buffer.count > maxSize { throw .headerTooLarge(limit: maxSize) }
        return nil
    }

    /// Splits a head into its start line and header fields.
    static func lines(_ head: [UInt8]) throws(WebSocketError) -> (String, HTTPHeaders) {
        // Header bytes must be visible ASCII, space or tab (obs-text is refused: no one needs it here).
        for b in head where b != 13 && b != 10 && b != 9 && (b < 0x20 || b > 0x7E) {
            throw .badHandshake(status: 400, reason: "invalid byte 0x\(String(b, radix: 16)) in HTTP head")
        }
        let text = String(decoding: head.dropLast(4), as: UTF8.self)
        var rawLines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard !rawLines.isEmpty else { throw .badHandshake(status: 400, reason: "empty request") }
        let start = String(rawLines.removeFirst())
        var headers = HTTPHeaders()
        for line in rawLines {
            if line.contains("\n") || line.contains("\r") { throw .badHandshake(status: 400, reason: "bare CR or LF in head") }
            if line.first == " " || line.first == "\t" { throw .badHandshake(status: 400, reason: "obsolete line folding") }
            guard let colon = line.firstIndex(of: ":") else { throw .badHandshake(status: 400, reason: "header line without a colon") }
            let name = line[..<colon]
            if name.isEmpty || name.contains(where: { $0 == " " || $0 == "\t" }) {
                throw .badHandshake(status: 400, reason: "invalid header name")
            }
            headers.add(name: String(name), value: line[line.index(after: colon)...].trimmingASCIIWhitespace())
        }
        return (start, headers)
    }

    /// Parses a request head.
    public static func parseRequest(_ head: [UInt8]) throws(WebSocketError) -> HTTPRequestHead {
        let (start, headers) = try lines(head)
        let parts = start.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .badHandshake(status: 400, reason: "malformed request line")
        }
        guard parts[2].hasPrefix("HTTP/") else { throw .badHandshake(status: 400, reason: "not an HTTP request") }
        return HTTPRequestHead(method: String(parts[0]), target: String(parts[1]), version: String(parts[2]), headers: headers)
    }

    /// Parses a response head.
    public static func parseResponse(_ head: [UInt8]) throws(WebSocketError) -> HTTPResponseHead {
        let (start, headers) = try lines(head)
        let parts = start.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]), (100...599).contains(status) else {
            throw .invalidUpgradeResponse("malformed status line")
        }
        return HTTPResponseHead(version: String(parts[0]), status: status,
                                reason: parts.count > 2 ? String(parts[2]) : "", headers: headers)
    }
}
