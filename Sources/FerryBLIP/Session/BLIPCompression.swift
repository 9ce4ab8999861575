import CFerrySystem
import CZlib

/// One direction's raw-DEFLATE compressor, shared by every compressed frame of a connection
/// and never reset (Protocol/blip.md §2.8). Each frame ends with a sync flush whose
/// `00 00 FF FF` trailer is removed.
final class BLIPDeflater {
    private var stream = z_stream()
    private var ready = false
    /// Output scratch, reused across frames (a frame's worth plus deflate's worst-case growth).
    private var chunk = [UInt8](repeating: 0, count: 20 * 1024)

    init(level: Int32 = 6) {
        ready = deflateInit2_(&stream, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY,
                              ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    deinit { if ready { deflateEnd(&stream) } }

    /// Compresses `input` with a sync flush; appends the output, trailer removed, to `out`.
    func compress(_ input: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(BLIPError) {
        guard ready else { throw .protocolError("deflate unavailable") }
        let start = out.count
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        repeat {
            let produced: Int = chunk.withUnsafeMutableBytes { c in
                stream.next_out = c.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(c.count)
                _ = deflate(&stream, Z_SYNC_FLUSH)
                return c.count - Int(stream.avail_out)
            }
            out.append(contentsOf: chunk[..<produced])
        } while stream.avail_out == 0
        stream.next_in = nil
        guard out.count - start >= 4, Array(out[(out.count - 4)...]) == BLIPConstants.syncFlushTrailer else {
            throw .protocolError("deflate did not end with a sync-flush trailer")
        }
        out.removeLast(4)
    }
}

/// One direction's raw-DEFLATE decompressor, shared by every compressed frame received.
final class BLIPInflater {
    private var stream = z_stream()
    private var ready = false
    /// Output scratch, reused across frames.
    private var chunk = [UInt8](repeating: 0, count: 32 * 1024)
    /// The most a single frame may inflate to (a decompression-bomb guard).
    let maxOutput: Int

    init(maxOutput: Int) {
        self.maxOutput = maxOutput
        ready = inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    deinit { if ready { inflateEnd(&stream) } }

    /// Inflates one frame's payload followed by the stripped sync-flush trailer, appending the
    /// output to `out`.
    func decompress(_ input: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(BLIPError) {
        guard ready else { throw .protocolError("inflate unavailable") }
        let start = out.count
        try inflate(input, into: &out, start: start)
        try BLIPConstants.syncFlushTrailer.withUnsafeBytes { t in
            Result { () throws(BLIPError) in try inflate(t, into: &out, start: start) }
        }.get()
    }

    private func inflate(_ input: UnsafeRawBufferPointer, into out: inout [UInt8], start: Int) throws(BLIPError) {
        guard let base = input.baseAddress, input.count > 0 else { return }
        stream.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        defer { stream.next_in = nil }
        var status: Int32 = Z_OK
        repeat {
            let inBefore = stream.avail_in
            let produced: Int = chunk.withUnsafeMutableBytes { c in
                stream.next_out = c.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(c.count)
                status = zlibInflate(&stream, Z_SYNC_FLUSH)
                return c.count - Int(stream.avail_out)
            }
            out.append(contentsOf: chunk[..<produced])
            // A BLIP stream never ends (no final block) and every call must make progress;
            // anything else would loop forever on crafted input.
            if status == Z_STREAM_END { throw .protocolError("deflate stream ended (final block)") }
            if status != Z_OK && status != Z_BUF_ERROR { throw .protocolError("invalid deflate data") }
            if produced == 0 && stream.avail_in == inBefore {
                if inBefore == 0 { break }
                throw .protocolError("truncated deflate data")
            }
            if out.count - start > maxOutput { throw .protocolError("compressed frame inflates past \(maxOutput) bytes") }
        } while stream.avail_in > 0 || stream.avail_out == 0
    }
}

/// zlib's `inflate`, named apart from `BLIPInflater.inflate`.
private func zlibInflate(_ s: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 { inflate(s, flush) }

/// The running CRC-32 (zlib's) of one direction.
struct BLIPChecksum {
    private(set) var value: UInt32 = 0

    /// Advances the checksum over `bytes`: the carry-less-multiply fold in C, or zlib on CPUs
    /// without PCLMULQDQ.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return }
        var crc = value
        let folded = ferry_crc32_prefix(&crc, base, bytes.count)
        if folded < bytes.count {
            crc = UInt32(crc32(uLong(crc), base + folded, uInt(bytes.count - folded)))
        }
        value = crc
    }
}
