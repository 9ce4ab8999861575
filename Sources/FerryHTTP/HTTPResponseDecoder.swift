/// Decodes the responses an HTTP/1.x server sends on one connection (Protocol/http.md,
/// "Responses"): bytes in, events out. Sans-I/O, the client's mirror of `HTTPRequestDecoder`.
///
/// A response's framing depends on the request it answers (RFC 9112 §6.3): before each request
/// the caller says which method it sent (`expectResponse(toMethod:)`), so the answer to a `HEAD`
/// is read without a body. An interim `1xx` response is reported (`interim`) and the final one
/// follows. A response with neither
/// `Content-Length` nor chunking runs until the server closes; `finish()` ends it. A response
/// that breaks the protocol throws an `HTTPError` (status 502: the server's fault) and the
/// decoder stays failed.
public struct HTTPResponseDecoder: Sendable {
    /// What the decoder read.
    public enum Event: Sendable, Equatable {
        /// An interim (`1xx`) response, e.g. `100 Continue`; the final one follows.
        case interim(HTTPResponseHead)
        /// A response's head. Its body, if any, follows.
        case head(HTTPResponseHead)
        /// The next piece of the body (de-chunked, still content-coded).
        case body([UInt8])
        /// The response is complete.
        case end
    }

    /// The limits in force.
    public let limits: HTTPLimits
    private var reader: HTTPMessageReader
    private var failed = false
    /// The requests sent and not answered yet, oldest first: method and body limit.
    private var methods: [(method: String, maxBodySize: Int)] = []
    /// Whether the connection may carry another request after the current response.
    public private(set) var keepAlive = true

    /// A decoder with these limits.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
        reader = HTTPMessageReader(limits: limits, noun: "response")
    }

    /// Whether every response expected so far has been read and nothing more is buffered.
    public var isIdle: Bool { !failed && methods.isEmpty && reader.isIdle }

    /// Announces a request sent with `method`; its response is the next one read. Its body may
    /// be up to `maxBodySize` bytes (nil: `limits.maxBodySize`); a feed read piece by piece
    /// for hours sets `Int.max`.
    public mutating func expectResponse(toMethod method: String, maxBodySize: Int? = nil) {
        methods.append((method, maxBodySize ?? limits.maxBodySize))
    }

    /// Takes the next bytes from the connection; returns the events they complete.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(HTTPError) -> [Event] {
        guard !failed else { throw HTTPError(status: 502, reason: "the connection already failed") }
        reader.append(bytes)
        var events: [Event] = []
        do throws(HTTPError) {
            while try step(&events) {}
        } catch {
            fail()
            throw error
        }
        reader.compact()
        return events
    }

    /// The server closed the connection: ends a response that runs until the close; throws
    /// if a response was cut short.
    public mutating func finish() throws(HTTPError) -> [Event] {
        guard !failed else { return [] }
        do throws(HTTPError) {
            if try reader.finish() {
                methods.removeFirst()
                return [.end]
            }
            guard methods.isEmpty || reader.isIdle else {
                throw HTTPError(status: 502, reason: "the connection closed in the middle of a response")
            }
            return []
        } catch {
            fail()
            throw error
        }
    }

    private mutating func fail() {
        failed = true
        keepAlive = false
        reader.reset()
    }

    private mutating func step(_ events: inout [Event]) throws(HTTPError) -> Bool {
        if reader.awaitsHead {
            guard let (method, maxBodySize) = methods.first else {
                guard reader.isIdle else { throw HTTPError(status: 502, reason: "bytes from the server with no request outstanding") }
                return false
            }
            guard let bytes = try reader.nextHead() else { return false }
            let (head, minor) = try HTTPHeadReader.parseResponse(bytes, limits: limits)
            if head.status < 200 {
                events.append(.interim(head))  // 100 Continue, 103: the final one follows
                return true
            }
            let framing = try Self.framing(of: head, minorVersion: minor, method: method, maxBodySize: maxBodySize)
            reader.maxBodySize = maxBodySize
            keepAlive = Self.persists(head, minorVersion: minor) && framing != .untilClose
            events.append(.head(head))
            reader.beginBody(framing)
            if !HTTPMessageReader.hasBody(framing) {
                methods.removeFirst()
                events.append(.end)
            }
            return true
        }
        switch try reader.stepBody() {
        case .needMore: return false
        case .piece(let bytes):
            events.append(.body(bytes))
            if reader.awaitsHead {
                methods.removeFirst()
                events.append(.end)
            }
            return true
        case .progressed: return true
        case .end:
            methods.removeFirst()
            events.append(.end)
            return true
        }
    }

    /// RFC 9112 §6.3, in order: no body after `HEAD`, `204` or `304` (and a `2xx` to
    /// `CONNECT`); chunked when `Transfer-Encoding` ends with it; else `Content-Length`; else
    /// until the close.
    private static func framing(of head: HTTPResponseHead, minorVersion: Int, method: String,
                                maxBodySize: Int) throws(HTTPError) -> HTTPMessageReader.Framing {
        if method == "HEAD" || head.status == 204 || head.status == 304 || (method == "CONNECT" && head.status < 300) {
            return .none
        }
        let codings = head.tokens("Transfer-Encoding")
        if let last = codings.last {
            // A coding other than chunked last means the length is the close (§6.3 rule 4).
            return last.caseInsensitiveEquals("chunked") ? .chunked : .untilClose
        }
        let lengths = head.tokens("Content-Length")
        if let first = lengths.first {
            guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.utf8.count <= 18,
                  first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(first) else {
                throw HTTPError(status: 502, reason: "invalid Content-Length in the response")
            }
            guard n <= maxBodySize else {
                throw HTTPError(status: 413, reason: "response body larger than \(maxBodySize) bytes")
            }
            return .length(n)
        }
        return .untilClose
    }

    /// Whether the server keeps the connection open after this response.
    private static func persists(_ head: HTTPResponseHead, minorVersion: Int) -> Bool {
        let connection = head.tokens("Connection")
        if connection.contains(where: { $0.caseInsensitiveEquals("close") }) { return false }
        return minorVersion >= 1 || connection.contains { $0.caseInsensitiveEquals("keep-alive") }
    }
}

extension HTTPResponseHead {
    /// Parses one complete response head (without its final CRLF CRLF); the reason phrase is
    /// kept in `reason`. Errors carry status 502 (the server's fault).
    public static func parse(_ head: ArraySlice<UInt8>, limits: HTTPLimits = HTTPLimits()) throws(HTTPError) -> HTTPResponseHead {
        try HTTPHeadReader.parseResponse(head, limits: limits).head
    }

    /// The comma-separated tokens of every `name` field, trimmed.
    public func tokens(_ name: String) -> [String] { HTTPHeaders.tokens(of: values(of: name)) }

    /// The fields as `HTTPHeaders`.
    public var fields: HTTPHeaders { HTTPHeaders(headers.map { ($0.name, $0.value) }) }

    /// The first value of a header field, by case-insensitive name.
    public subscript(name: String) -> String? {
        headers.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of a header field, by case-insensitive name, in order.
    public func values(of name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }
}
