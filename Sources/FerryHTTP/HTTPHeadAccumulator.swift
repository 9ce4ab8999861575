/// Collects bytes until one complete head (`CRLF CRLF`) and hands it over with whatever came
/// after it, untouched: for a connection that changes protocol after its head (the WebSocket
/// upgrade, whose first frames may arrive in the same read as the request or the `101`).
/// Sans-I/O, with a size limit so a peer cannot make it buffer without bound; empty lines
/// before the head are skipped (RFC 9112 §2.2).
public struct HTTPHeadAccumulator: Sendable {
    private var buffer: [UInt8] = []
    private var scanFrom = 0
    /// The largest head accepted, in bytes (its final CRLF CRLF included).
    public let maxSize: Int

    /// An accumulator with a head-size limit.
    public init(maxSize: Int = HTTPLimits().maxHeadSize) { self.maxSize = maxSize }

    /// Bytes buffered so far.
    public var bufferedCount: Int { buffer.count }

    /// Appends bytes; once the head is complete, returns it (without its final CRLF CRLF, as
    /// `HTTPRequestHead.parse` and `HTTPResponseHead.parse` take it) and the bytes after it.
    /// Throws a 431 `HTTPError` past the limit.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(HTTPError) -> (head: ArraySlice<UInt8>, rest: [UInt8])? {
        buffer.append(contentsOf: bytes)
        var start = 0
        while buffer.count - start >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 { start += 2 }
        var i = max(start, scanFrom - 3)
        while i + 3 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                let end = i + 4
                guard end - start <= maxSize else { throw HTTPError(status: 431, reason: "head larger than \(maxSize) bytes") }
                let head = Array(buffer[start..<i])[...]
                let rest = Array(buffer[end...])
                buffer = []
                scanFrom = 0
                return (head, rest)
            }
            i += 1
        }
        scanFrom = buffer.count
        guard buffer.count - start <= maxSize else { throw HTTPError(status: 431, reason: "head larger than \(maxSize) bytes") }
        return nil
    }
}
