/// Compresses outgoing messages for permessage-deflate (RFC 7692 §7.2.1): raw DEFLATE (no zlib
/// header), each message or fragment ended with a sync flush, the final `00 00 FF FF` removed.
/// zlib is driven through `RawDeflateStream`. One per connection; the output buffer is reused.
/// Not thread-safe: its state machine owns it.
final class MessageDeflater {
    /// The sync-flush marker removed from the end of every compressed message.
    static let trailer: (UInt8, UInt8, UInt8, UInt8) = (0x00, 0x00, 0xFF, 0xFF)

    private let raw: RawDeflateStream
    private let noContextTakeover: Bool
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0

    /// A compressor with a `windowBits` window (8 is raised to 9: zlib refuses 8 for raw
    /// deflate, and with 9 it never emits a distance beyond 250, so an 8-bit peer still
    /// inflates it). Nil if zlib cannot allocate its state.
    init?(level: Int, windowBits: Int, memoryLevel: Int, noContextTakeover: Bool) {
        self.noContextTakeover = noContextTakeover
        let bits = min(max(windowBits, 9), 15)
        guard let raw = RawDeflateStream(compressionLevel: level, windowBits: bits, memoryLevel: memoryLevel) else { return nil }
        self.raw = raw
    }

    deinit {
        buffer?.deallocate()
    }

    /// Compresses one message (`final`) or one fragment of it with a sync flush. A final piece
    /// loses its `00 00 FF FF` trailer (an empty one becomes the single byte `00`, RFC 7692
    /// §7.2.3.6) and, with no context takeover, resets the compressor. The result stays valid
    /// until the next call.
    func compress(_ input: UnsafeRawBufferPointer, final: Bool) -> UnsafeRawBufferPointer {
        reserve(raw.compressBound(input.count) + 16)
        var count = 0
        raw.setInput(input)
        while true {
            // `reserve` guarantees a buffer; a zero-capacity one cannot happen.
            guard let out = buffer else { break }
            // Z_BUF_ERROR (nothing to do: a repeated flush with no input) is not an error.
            count += raw.syncFlush(into: UnsafeMutableRawBufferPointer(start: out + count, count: capacity - count)).produced
            if count < capacity { break }
            reserve(capacity * 2)
        }
        raw.clearInput()
        if final {
            if noContextTakeover { raw.reset() }
            if count >= 4, let b = buffer?.assumingMemoryBound(to: UInt8.self),
               (b[count - 4], b[count - 3], b[count - 2], b[count - 1]) == Self.trailer {
                count -= 4
            }
            if count == 0, let b = buffer {
                b.storeBytes(of: 0, as: UInt8.self)
                count = 1
            }
        }
        return UnsafeRawBufferPointer(start: buffer, count: count)
    }

    /// Ensures room for `n` bytes, keeping what was written.
    private func reserve(_ n: Int) {
        guard n > capacity else { return }
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 16)
        if let old = buffer {
            fresh.copyMemory(from: old, byteCount: capacity)
            old.deallocate()
        }
        buffer = fresh
        capacity = n
    }

    /// Gives a large buffer back after a big message.
    func trim() {
        guard capacity > 64 * 1024 else { return }
        buffer?.deallocate()
        buffer = nil
        capacity = 0
    }
}
