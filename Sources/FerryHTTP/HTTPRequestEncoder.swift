/// Writes HTTP/1.1 requests byte for byte (Protocol/http.md, "Requests"): the client's mirror
/// of `HTTPResponseEncoder`, with the same field rules (a CR or LF in a value is dropped).
/// Sans-I/O: it returns bytes for the caller to write.
public enum HTTPRequestEncoder {
    /// A complete request: request line, `headers`, then `Content-Length` and `body` when there
    /// is a body (or the method is one that carries one, so a `POST` with an empty body still
    /// says `Content-Length: 0`, as servers expect).
    public static func encode(method: String, target: String, headers: [(name: String, value: String)],
                              body: [UInt8]? = nil) -> [UInt8] {
        var out = encodeHead(method: method, target: target, headers: headers, bodyLength: body?.count)
        if let body { out += body }
        return out
    }

    /// The head alone, announcing a body of `bodyLength` bytes (sent after it, e.g. once the
    /// server answered `100 Continue` to `Expect: 100-continue`).
    public static func encodeHead(method: String, target: String, headers: [(name: String, value: String)],
                                  bodyLength: Int?) -> [UInt8] {
        var out = requestLine(method: method, target: target)
        HTTPResponseEncoder.appendFields(headers, to: &out)
        if bodyLength != nil || ["POST", "PUT", "PATCH"].contains(method) {
            HTTPResponseEncoder.appendField("Content-Length", String(bodyLength ?? 0), to: &out)
        }
        out += HTTPResponseEncoder.crlf
        return out
    }

    /// The head of a request whose body follows in chunks (`HTTPResponseEncoder.chunk`, then
    /// `lastChunk`: chunk framing is the same both ways).
    public static func encodeChunkedHead(method: String, target: String, headers: [(name: String, value: String)]) -> [UInt8] {
        var out = requestLine(method: method, target: target)
        HTTPResponseEncoder.appendFields(headers, to: &out)
        HTTPResponseEncoder.appendField("Transfer-Encoding", "chunked", to: &out)
        out += HTTPResponseEncoder.crlf
        return out
    }

    private static func requestLine(method: String, target: String) -> [UInt8] {
        // Bytes that would break the line (space, CR, LF) never reach the wire.
        let safeTarget = target.utf8.filter { $0 > 0x20 && $0 != 0x7F }
        return Array(method.utf8) + [0x20] + safeTarget + Array(" HTTP/1.1\r\n".utf8)
    }
}
