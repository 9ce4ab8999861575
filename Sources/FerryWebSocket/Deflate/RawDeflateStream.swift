import CZlib

/// One zlib stream of raw DEFLATE (RFC 1951: no zlib header, no Adler-32 trailer) in one
/// direction, driven with sync flushes. The one `z_stream` wrapper in Ferry: permessage-deflate
/// (`MessageDeflater`, `MessageInflater`) and BLIP's frame compression (FerryBLIP's
/// `BLIPDeflater`, `BLIPInflater`) are built on it, and keep their protocol's rules to
/// themselves — the removed `00 00 FF FF` trailer, context takeover, output limits, what counts
/// as an error.
///
/// The `z_stream` lives at a fixed heap address for the stream's lifetime (zlib keeps a pointer
/// back to it). Input is borrowed: `setInput` points zlib at the caller's bytes, which must stay
/// valid until they are consumed or `clearInput` is called. Not thread-safe: one owner.
package final class RawDeflateStream {
    /// Which way the bytes go.
    package enum Direction: Sendable {
        /// `deflate`: plain bytes in, compressed bytes out.
        case compress
        /// `inflate`: compressed bytes in, plain bytes out.
        case decompress
    }

    /// What one call of `deflate` or `inflate` returned.
    package enum Status: Equatable {
        /// `Z_OK`: progress was made.
        case ok
        /// `Z_BUF_ERROR`: no progress was possible (no input, or no room); not an error by itself.
        case bufferError
        /// `Z_STREAM_END`: the compressed data ended with a final block.
        case streamEnd
        /// `Z_NEED_DICT`: the data asks for a preset dictionary.
        case needDictionary
        /// `Z_MEM_ERROR`: zlib could not allocate.
        case outOfMemory
        /// Any other code (invalid data, a broken stream), with zlib's message if it gave one.
        case failed(String?)
    }

    /// Which way this stream goes.
    package let direction: Direction
    private let stream: UnsafeMutablePointer<z_stream>

    /// A compressor (`deflateInit2` with a negative window: raw DEFLATE) with a `windowBits`
    /// window (9…15; zlib refuses 8 for raw streams) and the default strategy. Nil if zlib
    /// refuses the parameters or cannot allocate its state.
    package init?(compressionLevel level: Int, windowBits: Int, memoryLevel: Int) {
        direction = .compress
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard deflateInit2_(stream, Int32(level), Z_DEFLATED, -Int32(windowBits), Int32(memoryLevel), Z_DEFAULT_STRATEGY,
                            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
    }

    /// A decompressor (`inflateInit2` with a negative window: raw DEFLATE) accepting data
    /// compressed with a window of up to `windowBits` (9…15). Nil if zlib cannot allocate its state.
    package init?(decompressingWindowBits windowBits: Int) {
        direction = .decompress
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard inflateInit2_(stream, -Int32(windowBits), ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
    }

    deinit {
        switch direction {
        case .compress: deflateEnd(stream)
        case .decompress: inflateEnd(stream)
        }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Points the stream at `input` (borrowed) for the following calls.
    package func setInput(_ input: UnsafeRawBufferPointer) {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
    }

    /// Forgets the input, so no pointer to the caller's bytes outlives its call.
    package func clearInput() {
        stream.pointee.next_in = nil
        stream.pointee.avail_in = 0
    }

    /// Input bytes not consumed yet.
    package var availableInput: Int { Int(stream.pointee.avail_in) }

    /// Runs `deflate` or `inflate` once with `Z_SYNC_FLUSH`, writing into `output`. Returns
    /// zlib's status and the number of bytes written; all of `output` written (`produced ==
    /// output.count`) means there may be more to take.
    package func syncFlush(into output: UnsafeMutableRawBufferPointer) -> (status: Status, produced: Int) {
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        let code = switch direction {
        case .compress: deflate(stream, Z_SYNC_FLUSH)
        case .decompress: inflate(stream, Z_SYNC_FLUSH)
        }
        return (status(code), output.count - Int(stream.pointee.avail_out))
    }

    /// Starts afresh: the window (the context) is forgotten, the settings kept.
    package func reset() {
        switch direction {
        case .compress: deflateReset(stream)
        case .decompress: inflateReset(stream)
        }
    }

    /// The most a compressor can write for `count` input bytes in one piece (`deflateBound`).
    package func compressBound(_ count: Int) -> Int {
        Int(deflateBound(stream, uLong(count)))
    }

    /// Whether a decompressor stopped at the end of a block (zlib's `data_type` bit 128): data
    /// that ends elsewhere was cut short.
    package var endsOnBlockBoundary: Bool { stream.pointee.data_type & 128 != 0 }

    private func status(_ code: Int32) -> Status {
        switch code {
        case Z_OK: .ok
        case Z_BUF_ERROR: .bufferError
        case Z_STREAM_END: .streamEnd
        case Z_NEED_DICT: .needDictionary
        case Z_MEM_ERROR: .outOfMemory
        default: .failed(stream.pointee.msg.map { String(cString: $0) })
        }
    }
}
