import CZlib

/// gzip (RFC 1952) in one shot, for HTTP bodies (`Content-Encoding: gzip` both ways) and
/// CouchDB's gzip-encoded attachments: the one home of gzip framing. Raw DEFLATE for WebSocket
/// frames is `RawDeflateStream`'s; gzip needs `windowBits` 16+15 and is bounded and one-shot.
public enum Gzip {
    /// Why gzip data could not be decoded.
    public enum Failure: Error, Sendable, Equatable {
        /// The data inflates past the limit given (a decompression bomb stops there).
        case tooLarge(limit: Int)
        /// The data is not complete gzip data (truncated, corrupt, or a bad CRC).
        case malformed
    }

    /// The gzip member(s) in `bytes`, decoded; at most `limit` bytes are held: data that
    /// inflates past it is refused before more is produced.
    public static func decode(_ bytes: some Collection<UInt8>, limit: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        // 16 + MAX_WBITS: gzip header and trailer (CRC-32 and size checked by zlib).
        guard inflateInit2_(&stream, 16 + 15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .malformed
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
        guard out.count <= limit else { throw .tooLarge(limit: limit) }
        guard status == Z_STREAM_END else { throw .malformed }
        return out
    }

    /// `bytes` as one gzip member.
    public static func encode(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
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
