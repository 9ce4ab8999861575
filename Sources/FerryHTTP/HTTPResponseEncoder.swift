/// The head of an HTTP/1.1 response.
public struct HTTPResponseHead: Sendable, Equatable {
    /// The status code (100–599).
    public var status: Int
    /// Header fields in the order they are written. The encoder adds the framing field
    /// (`Content-Length` or `Transfer-Encoding: chunked`) itself.
    public var headers: [(name: String, value: String)]
    /// The reason phrase as received (decoded responses); the encoder writes its own
    /// (`reasonPhrase`).
    public var reason: String

    /// A response head with `status` and `headers`.
    public init(status: Int, headers: [(name: String, value: String)] = [], reason: String = "") {
        self.status = status
        self.headers = headers
        self.reason = reason
    }

    public static func == (a: HTTPResponseHead, b: HTTPResponseHead) -> Bool {
        a.status == b.status && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }
}

/// Writes HTTP/1.1 responses byte for byte (Protocol/http.md, "Responses"): a whole response
/// with `Content-Length`, or a head with `Transfer-Encoding: chunked` followed by chunks and
/// the last chunk. Sans-I/O: it returns bytes for the caller to write.
public enum HTTPResponseEncoder {
    /// A complete response: status line, `headers`, `Content-Length`, the body. A 1xx, 204 or
    /// 304 response carries neither a body nor `Content-Length` (RFC 9110 §8.6); `head: true`
    /// (the answer to `HEAD`) writes the length of `body` without the body.
    public static func encode(_ head: HTTPResponseHead, body: [UInt8] = [], head isHead: Bool = false) -> [UInt8] {
        let bodiless = head.status < 200 || head.status == 204 || head.status == 304
        var out: [UInt8] = []
        // One allocation for the whole answer: the fields are short, the body is known.
        out.reserveCapacity(64 + head.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
                            + (bodiless || isHead ? 0 : body.count))
        appendStatusLine(head.status, to: &out)
        appendFields(head.headers, to: &out)
        if !bodiless { appendField("Content-Length", String(body.count), to: &out) }
        out += crlf
        if !bodiless && !isHead { out += body }
        return out
    }

    /// The head of a response whose body follows in chunks (`chunk`, then `lastChunk`).
    public static func encodeChunkedHead(_ head: HTTPResponseHead) -> [UInt8] {
        var out: [UInt8] = []
        appendStatusLine(head.status, to: &out)
        appendFields(head.headers, to: &out)
        appendField("Transfer-Encoding", "chunked", to: &out)
        out += crlf
        return out
    }

    /// One chunk of a chunked body; empty bytes give nothing (an empty chunk would end the body).
    public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        guard !bytes.isEmpty else { return [] }
        return Array(String(bytes.count, radix: 16).utf8) + crlf + bytes + crlf
    }

    /// The end of a chunked body (no trailer fields).
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// `HTTP/1.1 100 Continue`, sent before reading a body the client holds back.
    public static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// The reason phrase Ferry writes for a status (RFC 9110 §15).
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }

    static let crlf: [UInt8] = [13, 10]

    /// The status lines of the answers a server gives most, made once.
    private static let commonStatusLines: [Int: [UInt8]] = Dictionary(
        uniqueKeysWithValues: [200, 201, 202, 204, 304, 400, 401, 403, 404, 409, 412].map { ($0, statusLineBytes($0)) })

    private static func statusLineBytes(_ status: Int) -> [UInt8] {
        Array("HTTP/1.1 \(status) \(reasonPhrase(status))\r\n".utf8)
    }

    private static func appendStatusLine(_ status: Int, to out: inout [UInt8]) {
        if let line = commonStatusLines[status] { out += line } else { out += statusLineBytes(status) }
    }

    static func appendFields(_ fields: [(name: String, value: String)], to out: inout [UInt8]) {
        for f in fields { appendField(f.name, f.value, to: &out) }
    }

    static func appendField(_ name: String, _ value: String, to out: inout [UInt8]) {
        // A CR or LF in a value would split the response: such bytes are dropped.
        out += name.utf8
        out.append(58)
        out.append(32)
        if value.utf8.contains(where: { $0 == 13 || $0 == 10 }) {
            out += value.utf8.filter { $0 != 13 && $0 != 10 }
        } else {
            out += value.utf8
        }
        out += crlf
    }
}
