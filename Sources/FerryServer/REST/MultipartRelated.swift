import CFerrySystem

/// A `multipart/related` body (RFC 2387 over RFC 2046 §5.1) split into its parts, as CouchDB
/// clients upload a document with its attachments: the JSON document first, then one part per
/// attachment marked `"follows": true`.
///
/// The bytes are untrusted: every malformation is a `RESTError` 400, never a crash, and the
/// work is bounded by the body (already capped by `HTTPLimits.maxBodySize`), `maxParts` and
/// `maxHeaderBytes`.
struct MultipartRelated {
    /// One part: its header fields (names lowercased) and its content.
    struct Part {
        var headers: [(name: String, value: String)]
        var body: ArraySlice<UInt8>

        /// The first value of a header field.
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

        /// The `filename` parameter of `Content-Disposition`, which CouchDB's replicator sends
        /// with each attachment part.
        var filename: String? {
            header("content-disposition").flatMap { MultipartRelated.parameter("filename", in: $0) }
        }
    }

    /// More parts than any document upload needs: a guard against a body of empty parts.
    static let maxParts = 10_000
    /// The largest header section of one part.
    static let maxHeaderBytes = 16 * 1024

    /// The parts, in order.
    let parts: [Part]

    /// Whether a `Content-Type` announces `multipart/related`.
    static func isMultipartRelated(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        return MediaType.essence(contentType) == "multipart/related"
    }

    /// Splits `body` by the boundary that `contentType` names.
    init(contentType: String, body: [UInt8]) throws(RESTError) {
        guard let boundary = Self.parameter("boundary", in: contentType) else {
            throw .badRequest("multipart/related needs a boundary parameter")
        }
        // RFC 2046 §5.1.1: 1 to 70 characters, none of them a line break.
        guard (1...70).contains(boundary.utf8.count), !boundary.utf8.contains(where: { $0 == 13 || $0 == 10 }) else {
            throw .badRequest("multipart boundary must be 1 to 70 characters")
        }
        let dash = Array("--".utf8) + Array(boundary.utf8)
        let delimiter = [13, 10] + dash
        // The first delimiter may open the body (no CRLF before it) or follow a preamble.
        var cursor: Int
        if body.starts(with: dash) {
            cursor = dash.count
        } else if let at = Self.find(delimiter, in: body, from: 0) {
            cursor = at + delimiter.count
        } else {
            throw .badRequest("multipart body has no boundary")
        }
        var parts: [Part] = []
        while true {
            // After a delimiter: `--` closes the body; otherwise optional padding and CRLF.
            if Self.matches([45, 45], in: body, at: cursor) { break }
            while cursor < body.count, body[cursor] == 32 || body[cursor] == 9 { cursor += 1 }
            guard Self.matches([13, 10], in: body, at: cursor) else { throw .badRequest("bad multipart delimiter line") }
            cursor += 2
            guard let end = Self.find(delimiter, in: body, from: cursor) else {
                throw .badRequest("multipart body ends without its closing boundary")
            }
            parts.append(try Self.part(body[cursor..<end]))
            guard parts.count <= Self.maxParts else { throw .badRequest("more than \(Self.maxParts) multipart parts") }
            cursor = end + delimiter.count
        }
        guard !parts.isEmpty else { throw .badRequest("multipart body has no parts") }
        self.parts = parts
    }

    /// A part's header section (up to an empty line) and content.
    private static func part(_ bytes: ArraySlice<UInt8>) throws(RESTError) -> Part {
        let start = bytes.startIndex
        // No header fields at all: the part opens with the empty line.
        if matches([13, 10], in: bytes, at: start) { return Part(headers: [], body: bytes[(start + 2)...]) }
        guard let blank = find([13, 10, 13, 10], in: bytes, from: start) else {
            throw .badRequest("multipart part without a blank line after its headers")
        }
        guard blank - start <= maxHeaderBytes else { throw .badRequest("multipart part headers over \(maxHeaderBytes) bytes") }
        guard let text = String(validating: bytes[start..<blank], as: UTF8.self) else {
            throw .badRequest("multipart part headers are not UTF-8")
        }
        var headers: [(name: String, value: String)] = []
        for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) {
            guard let colon = line.firstIndex(of: ":") else { throw .badRequest("bad multipart header line") }
            let name = line[..<colon].trimmingASCIIWhitespace().lowercased()
            guard !name.isEmpty else { throw .badRequest("bad multipart header line") }
            headers.append((name, line[line.index(after: colon)...].trimmingASCIIWhitespace()))
        }
        return Part(headers: headers, body: bytes[(blank + 4)...])
    }

    /// A parameter of a header value such as `multipart/related; boundary="abc"` (quoted or
    /// not, name case-insensitive).
    static func parameter(_ name: String, in value: String) -> String? {
        for piece in value.split(separator: ";").dropFirst() {
            let kv = piece.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0].trimmingASCIIWhitespace().lowercased() == name else { continue }
            var v = kv[1].trimmingASCIIWhitespace()
            if v.count >= 2, v.hasPrefix("\""), v.hasSuffix("\"") { v = String(v.dropFirst().dropLast()) }
            return v
        }
        return nil
    }

    static func matches<C: RandomAccessCollection>(_ needle: [UInt8], in hay: C, at i: C.Index) -> Bool
        where C.Element == UInt8, C.Index == Int {
        guard i >= hay.startIndex, hay.endIndex - i >= needle.count else { return false }
        for (k, b) in needle.enumerated() where hay[i + k] != b { return false }
        return true
    }

    /// The first index at or after `from` where `needle` starts.
    static func find<C: RandomAccessCollection>(_ needle: [UInt8], in hay: C, from: Int) -> Int?
        where C.Element == UInt8, C.Index == Int {
        guard let first = needle.first, hay.endIndex - needle.count >= from else { return nil }
        let start = max(from, hay.startIndex)
        // Contiguous bytes are searched by glibc's `memmem` (vectorised): a document
        // read scans its whole body for `"_attachments"` this way.
        let fast: Int?? = hay.withContiguousStorageIfAvailable { buffer -> Int? in
            needle.withUnsafeBytes { n -> Int? in
                guard let base = buffer.baseAddress,
                      let hit = ferry_memmem(base + (start - hay.startIndex), buffer.count - (start - hay.startIndex), n.baseAddress, n.count) else { return nil }
                return hay.startIndex + UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
            }
        }
        if let fast { return fast }
        var i = start
        let last = hay.endIndex - needle.count
        while i <= last {
            if hay[i] == first && matches(needle, in: hay, at: i) { return i }
            i += 1
        }
        return nil
    }
}
