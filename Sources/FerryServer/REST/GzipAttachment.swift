import CZlib

/// Attachments CouchDB sends gzip-encoded (`"encoding":"gzip"`, `Content-Encoding: gzip` on a
/// multipart part): CouchDB compresses `[attachments] compressible_types` (text/*, JSON, XML,
/// JavaScript by default) and its replicator forwards them encoded. Ferry stores attachments
/// decoded (one blob per content, the same digest whichever way the bytes came, and BLIP peers
/// that know nothing of `encoding` read the right bytes), so the REST layer decodes here.
///
/// A second `z_stream` user beside `RawDeflateStream` (which is raw DEFLATE for WebSocket
/// frames): gzip framing needs `windowBits` 16+15, and this one is one-shot and bounded.
enum GzipAttachment {
    /// The gzip member(s) in `bytes`, decoded. `expectedLength` (the `length` the entry
    /// states) bounds the output: a body that inflates past it is refused before it is held
    /// (a decompression bomb costs at most that much), and one that ends short is refused too.
    static func decode(_ bytes: ArraySlice<UInt8>, expectedLength: Int64?, name: String) throws(RESTError) -> [UInt8] {
        let limit = Int(min(expectedLength ?? Int64(maxDecoded), Int64(maxDecoded)))
        var stream = z_stream()
        // 16 + MAX_WBITS: gzip header and trailer (CRC-32 and size checked by zlib).
        guard inflateInit2_(&stream, 16 + 15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw RESTError(500, "internal_server_error", "zlib inflateInit2 failed")
        }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        out.reserveCapacity(min(limit, 1 << 20))
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status: Int32 = Z_OK
        var input = Array(bytes)
        input.withUnsafeMutableBufferPointer { inBuf in
            stream.next_in = inBuf.baseAddress
            stream.avail_in = UInt32(inBuf.count)
            while out.count <= limit {
                let made = chunk.withUnsafeMutableBufferPointer { c -> Int in
                    stream.next_out = c.baseAddress
                    stream.avail_out = UInt32(c.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return c.count - Int(stream.avail_out)
                }
                out += chunk[..<made]
                // Concatenated gzip members (RFC 1952 §2.2) are one body: go on with the next.
                if status == Z_STREAM_END, stream.avail_in > 0 {
                    status = inflateReset(&stream)
                    continue
                }
                if status != Z_OK || (made == 0 && stream.avail_in == 0) { break }
            }
        }
        guard out.count <= limit else {
            throw .badRequest("attachment \(name.debugDescription) inflates past \(limit) bytes")
        }
        guard status == Z_STREAM_END else {
            throw .badRequest("attachment \(name.debugDescription) is not complete gzip data")
        }
        if let expectedLength, Int64(out.count) != expectedLength {
            throw .badRequest("attachment \(name.debugDescription) states length \(expectedLength) but decodes to \(out.count) bytes")
        }
        return out
    }

    /// The largest decoded attachment inflated in memory when the entry states no length (a
    /// request body is already capped; this caps what it may inflate to).
    static let maxDecoded = 256 << 20

    /// Whether CouchDB would store (and so serve) an attachment of `contentType` gzip-encoded:
    /// its default `[attachments] compressible_types` (`text/*, application/javascript,
    /// application/json, application/xml`), parameters ignored.
    static func isCompressible(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = MediaType.essence(contentType)
        return type.hasPrefix("text/") || ["application/javascript", "application/json", "application/xml"].contains(type)
    }

    /// Whether an `Accept-Encoding` field takes gzip (RFC 9110 §12.5.3: `gzip`, `x-gzip` or
    /// `*`, with a `q` above 0).
    static func accepted(by acceptEncoding: String?) -> Bool {
        guard let acceptEncoding else { return false }
        for item in acceptEncoding.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let coding = parts.first, ["gzip", "x-gzip", "*"].contains(coding) else { continue }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return q > 0
        }
        return false
    }

    /// `bytes` as one gzip member (for tests and for clients that ask for gzip).
    static func encode(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return [] }
        defer { deflateEnd(&stream) }
        var input = bytes
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(bytes.count))) + 32)
        var produced = 0
        input.withUnsafeMutableBufferPointer { inBuf in
            out.withUnsafeMutableBufferPointer { outBuf in
                stream.next_in = inBuf.baseAddress
                stream.avail_in = UInt32(inBuf.count)
                stream.next_out = outBuf.baseAddress
                stream.avail_out = UInt32(outBuf.count)
                _ = deflate(&stream, Z_FINISH)
                produced = outBuf.count - Int(stream.avail_out)
            }
        }
        out.removeSubrange(produced...)
        return out
    }
}
