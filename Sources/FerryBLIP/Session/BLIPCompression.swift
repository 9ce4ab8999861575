import CFerrySystem
import CZlib
import FerryWebSocket

/// One direction's raw-DEFLATE compressor, shared by every compressed frame of a connection
/// and never reset (Protocol/blip.md, "Compression"). Each frame ends with a sync flush whose
/// `00 00 FF FF` trailer is removed. zlib is driven through FerryWebSocket's `RawDeflateStream`.
final class BLIPDeflater {
    /// Nil if zlib could not set up (every `compress` then fails).
    private let raw: RawDeflateStream?
    /// Output scratch, reused across frames (a frame's worth plus deflate's worst-case growth).
    private var chunk = [UInt8](repeating: 0, count: 20 * 1024)

    init(level: Int32 = 6) {
        raw = RawDeflateStream(compressionLevel: Int(level), windowBits: 15, memoryLevel: 9)
    }

    /// Compresses `input` with a sync flush; appends the output, trailer removed, to `out`.
    func compress(_ input: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(BLIPError) {
        guard let raw else { throw .protocolError("deflate unavailable") }
        let start = out.count
        raw.setInput(input)
        var full: Bool
        repeat {
            let produced = chunk.withUnsafeMutableBytes { c in raw.syncFlush(into: c).produced }
            full = produced == chunk.count
            out.append(contentsOf: chunk[..<produced])
        } while full
        raw.clearInput()
        guard out.count - start >= 4, Array(out[(out.count - 4)...]) == BLIPConstants.syncFlushTrailer else {
            throw .protocolError("deflate did not end with a sync-flush trailer")
        }
        out.removeLast(4)
    }
}

/// One direction's raw-DEFLATE decompressor, shared by every compressed frame received.
/// zlib is driven through FerryWebSocket's `RawDeflateStream`.
final class BLIPInflater {
    /// Nil if zlib could not set up (every `decompress` then fails).
    private let raw: RawDeflateStream?
    /// Output scratch, reused across frames.
    private var chunk = [UInt8](repeating: 0, count: 32 * 1024)
    /// The most a single frame may inflate to (a decompression-bomb guard).
    let maxOutput: Int

    init(maxOutput: Int) {
        self.maxOutput = maxOutput
        raw = RawDeflateStream(decompressingWindowBits: 15)
    }

    /// Inflates one frame's payload followed by the stripped sync-flush trailer, appending the
    /// output to `out`.
    func decompress(_ input: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(BLIPError) {
        guard let raw else { throw .protocolError("inflate unavailable") }
        let start = out.count
        try inflate(input, with: raw, into: &out, start: start)
        try BLIPConstants.syncFlushTrailer.withUnsafeBytes { t in
            Result { () throws(BLIPError) in try inflate(t, with: raw, into: &out, start: start) }
        }.get()
    }

    private func inflate(_ input: UnsafeRawBufferPointer, with raw: RawDeflateStream, into out: inout [UInt8],
                         start: Int) throws(BLIPError) {
        guard input.baseAddress != nil, input.count > 0 else { return }
        raw.setInput(input)
        defer { raw.clearInput() }
        var full: Bool
        repeat {
            let inBefore = raw.availableInput
            let (status, produced) = chunk.withUnsafeMutableBytes { c in raw.syncFlush(into: c) }
            full = produced == chunk.count
            out.append(contentsOf: chunk[..<produced])
            // A BLIP stream never ends (no final block) and every call must make progress;
            // anything else would loop forever on crafted input.
            if status == .streamEnd { throw .protocolError("deflate stream ended (final block)") }
            if status != .ok && status != .bufferError { throw .protocolError("invalid deflate data") }
            if produced == 0 && raw.availableInput == inBefore {
                if inBefore == 0 { break }
                throw .protocolError("truncated deflate data")
            }
            if out.count - start > maxOutput { throw .protocolError("compressed frame inflates past \(maxOutput) bytes") }
        } while raw.availableInput > 0 || full
    }
}

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
