/// Parses a complete request head (without its final CRLF CRLF) into an `HTTPRequestHead`,
/// applying RFC 9112's rules for the request line, field syntax and message framing
/// (Protocol/http.md, "Requests").
enum HTTPHeadReader {
    static func parse(_ bytes: ArraySlice<UInt8>, limits: HTTPLimits) throws(HTTPError) -> HTTPRequestHead {
        let lines = try splitLines(bytes)
        let (method, target, minor) = try requestLine(lines[0])
        guard lines.count - 1 <= limits.maxHeaderCount else {
            throw HTTPError(status: 431, reason: "more than \(limits.maxHeaderCount) header fields")
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() { headers.append(try field(line)) }
        var head = HTTPRequestHead(method: method, target: target, minorVersion: minor, headers: headers,
                                   keepAlive: minor >= 1, expectsContinue: false, body: .none)
        try applySemantics(&head, limits: limits)
        return head
    }

    /// Parses a complete response head (without its final CRLF CRLF): the status line and the
    /// fields, with the same field rules as a request's (Protocol/http.md, "Responses").
    static func parseResponse(_ bytes: ArraySlice<UInt8>, limits: HTTPLimits) throws(HTTPError) -> (head: HTTPResponseHead, minorVersion: Int) {
        let lines = try splitLines(bytes)
        let line = lines[0]
        // `HTTP-version SP status-code SP [reason-phrase]` (RFC 9112 §4); the reason is dropped.
        let version = line.prefix(8)
        guard version.count == 8, version.starts(with: Array("HTTP/1.".utf8)), let minor = digit(version[version.startIndex + 7]),
              line.count >= 12, line[line.startIndex + 8] == UInt8(ascii: " "),
              let d0 = digit(line[line.startIndex + 9]), let d1 = digit(line[line.startIndex + 10]),
              let d2 = digit(line[line.startIndex + 11]), line.count == 12 || line[line.startIndex + 12] == UInt8(ascii: " ") else {
            throw HTTPError(status: 502, reason: "malformed status line")
        }
        let status = d0 * 100 + d1 * 10 + d2
        guard status >= 100 else { throw HTTPError(status: 502, reason: "malformed status line") }
        let reason = line.count > 13 ? String(decoding: line.dropFirst(13), as: UTF8.self) : ""
        guard lines.count - 1 <= limits.maxHeaderCount else {
            throw HTTPError(status: 502, reason: "more than \(limits.maxHeaderCount) header fields")
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() { headers.append(try field(line)) }
        return (HTTPResponseHead(status: status, headers: headers, reason: reason), minor)
    }

    /// The CRLF-separated lines of a head; a bare CR or LF is refused (RFC 9112 §2.2).
    private static func splitLines(_ bytes: ArraySlice<UInt8>) throws(HTTPError) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = bytes.startIndex
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == 13 {
                guard i + 1 < bytes.endIndex, bytes[i + 1] == 10 else { throw HTTPError.malformed("bare CR in the head") }
                lines.append(bytes[lineStart..<i])
                i += 2
                lineStart = i
                continue
            }
            if b == 10 { throw HTTPError.malformed("bare LF in the head") }
            i += 1
        }
        lines.append(bytes[lineStart..<bytes.endIndex])
        return lines
    }

    /// `method SP request-target SP HTTP-version`.
    private static func requestLine(_ line: ArraySlice<UInt8>) throws(HTTPError) -> (String, String, Int) {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HTTPError.malformed("malformed request line") }
        let (method, target, version) = (parts[0], parts[1], parts[2])
        guard !method.isEmpty, method.allSatisfy(isTokenByte) else { throw HTTPError.malformed("invalid method") }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw HTTPError.malformed("invalid request target")
        }
        guard version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[version.startIndex + 6] == UInt8(ascii: "."),
              let major = digit(version[version.startIndex + 5]), let minor = digit(version[version.startIndex + 7]) else {
            throw HTTPError.malformed("invalid HTTP version")
        }
        guard major == 1, minor <= 1 else { throw HTTPError(status: 505, reason: "HTTP/\(major).\(minor) is not supported") }
        return (String(decoding: method, as: UTF8.self), String(decoding: target, as: UTF8.self), minor)
    }

    /// `field-name ":" OWS field-value OWS`.
    private static func field(_ line: ArraySlice<UInt8>) throws(HTTPError) -> (name: String, value: String) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw HTTPError.malformed("header field without a colon") }
        let name = line[line.startIndex..<colon]
        // Whitespace before the colon, or a line starting with it (obsolete folding), is refused
        // (RFC 9112 §5.1, §5.2): a proxy could read such a field differently.
        guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw HTTPError.malformed("invalid header field name") }
        var value = line[line.index(after: colon)...]
        while let f = value.first, f == 32 || f == 9 { value = value.dropFirst() }
        while let l = value.last, l == 32 || l == 9 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 9 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw HTTPError.malformed("control character in a header field value")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    /// Host, framing, persistence and expectations (RFC 9112 §3.2, §6, §9.3; RFC 9110 §10.1.1).
    private static func applySemantics(_ head: inout HTTPRequestHead, limits: HTTPLimits) throws(HTTPError) {
        let hosts = head.values(of: "Host")
        if head.minorVersion == 1 && hosts.count != 1 {
            throw HTTPError.malformed(hosts.isEmpty ? "HTTP/1.1 request without Host" : "more than one Host field")
        }
        let codings = head.tokens("Transfer-Encoding")
        let lengths = head.tokens("Content-Length")
        if !codings.isEmpty {
            guard lengths.isEmpty else { throw HTTPError.malformed("both Transfer-Encoding and Content-Length") }
            guard head.minorVersion == 1 else { throw HTTPError.malformed("Transfer-Encoding in an HTTP/1.0 request") }
            guard codings.allSatisfy({ $0.caseInsensitiveEquals("chunked") }) else {
                throw HTTPError(status: 501, reason: "transfer coding \(codings.joined(separator: ", ")) is not implemented")
            }
            guard codings.count == 1 else { throw HTTPError.malformed("chunked applied more than once") }
            head.body = .chunked
        } else if let first = lengths.first {
            guard lengths.allSatisfy({ $0 == first }) else { throw HTTPError.malformed("differing Content-Length values") }
            guard !first.isEmpty, first.utf8.count <= 18, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let n = Int(first) else { throw HTTPError.malformed("invalid Content-Length") }
            guard n <= limits.maxBodySize else {
                throw HTTPError(status: 413, reason: "request body larger than \(limits.maxBodySize) bytes")
            }
            head.body = .length(n)
        }
        let connection = head.tokens("Connection")
        if connection.contains(where: { $0.caseInsensitiveEquals("close") }) {
            head.keepAlive = false
        } else if head.minorVersion == 0 {
            head.keepAlive = connection.contains { $0.caseInsensitiveEquals("keep-alive") }
        }
        if let expect = head["Expect"] {
            guard expect.caseInsensitiveEquals("100-continue") else {
                throw HTTPError(status: 417, reason: "expectation \(expect) is not supported")
            }
            head.expectsContinue = head.minorVersion == 1 && head.body != .none && head.body != .length(0)
        }
    }

    /// `tchar` of RFC 9110 §5.6.2.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): return true
        default: return false
        }
    }

    private static func digit(_ b: UInt8) -> Int? { b >= 0x30 && b <= 0x39 ? Int(b - 0x30) : nil }
}
