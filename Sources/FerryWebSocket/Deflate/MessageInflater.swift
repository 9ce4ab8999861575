/// Decompresses incoming permessage-deflate messages (RFC 7692 §7.2.2) with a bounded output:
/// the compressed bytes of a message are inflated as they arrive, straight into one growing
/// buffer whose size never exceeds `maxMessageSize + 1`, so a small message that would inflate
/// past the limit fails with `.messageTooBig` (close 1009) before the memory is taken. zlib is
/// driven through `RawDeflateStream`. Not thread-safe: its state machine owns it.
final class MessageInflater {
    private let raw: RawDeflateStream
    private let noContextTakeover: Bool
    /// The largest inflated message accepted.
    let maxMessageSize: Int
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0
    private var count = 0
    /// The stream ended with a final block (RFC 7692 §7.2.3.4); the rest of the message is ignored
    /// and the context starts afresh.
    private var ended = false
    /// The largest output buffer ever held (for the decompression-bomb test).
    private(set) var peakCapacity = 0

    /// The first output buffer, and the step in which it grows at first.
    static let initialCapacity = 16 * 1024

    /// A decompressor for a peer compressing with a `windowBits` window (raised to 9, which
    /// accepts everything an 8-bit window can produce). Nil if zlib cannot allocate its state.
    init?(windowBits: Int, noContextTakeover: Bool, maxMessageSize: Int) {
        self.noContextTakeover = noContextTakeover
        self.maxMessageSize = maxMessageSize
        let bits = min(max(windowBits, 9), 15)
        guard let raw = RawDeflateStream(decompressingWindowBits: bits) else { return nil }
        self.raw = raw
    }

    deinit {
        buffer?.deallocate()
    }

    /// The message inflated so far; valid until the next call.
    var message: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: buffer, count: count) }

    /// Inflates more compressed bytes of the current message; returns the bytes this call added
    /// (valid until the next call).
    func inflate(_ input: UnsafeRawBufferPointer) throws(WebSocketError) -> UnsafeRawBufferPointer {
        let before = count
        try run(input)
        return UnsafeRawBufferPointer(start: buffer.map { $0 + before }, count: count - before)
    }

    /// Ends the message: inflates the `00 00 FF FF` the sender removed and checks the data ended
    /// on a block boundary. Returns the bytes this added.
    func finish() throws(WebSocketError) -> UnsafeRawBufferPointer {
        let before = count
        if !ended {
            try withUnsafeBytes(of: MessageDeflater.trailer) { t throws(WebSocketError) in try run(t) }
            // inflate() reports in data_type bit 128 that it stopped at a block boundary.
            if !ended && !raw.endsOnBlockBoundary { throw .invalidCompressedData("compressed message is truncated") }
        }
        return UnsafeRawBufferPointer(start: buffer.map { $0 + before }, count: count - before)
    }

    /// Forgets the delivered message; resets the context when the peer does not keep its own.
    func endMessage() {
        count = 0
        if noContextTakeover || ended { raw.reset() }
        ended = false
        if capacity > 64 * 1024 {
            buffer?.deallocate()
            buffer = nil
            capacity = 0
        }
    }

    private func run(_ input: UnsafeRawBufferPointer) throws(WebSocketError) {
        guard !ended, input.baseAddress != nil, input.count > 0 else { return }
        raw.setInput(input)
        defer { raw.clearInput() }
        while true {
            if count == capacity { try grow() }
            guard let out = buffer else { throw .invalidCompressedData("no inflate buffer") }
            let inBefore = raw.availableInput
            let room = capacity - count
            let (status, produced) = raw.syncFlush(into: UnsafeMutableRawBufferPointer(start: out + count, count: room))
            count += produced
            switch status {
            case .ok, .bufferError: break
            case .streamEnd: ended = true; return
            case .needDictionary: throw .invalidCompressedData("deflate data asks for a dictionary")
            case .outOfMemory: throw .invalidCompressedData("inflate out of memory")
            case .failed(let message): throw .invalidCompressedData(message ?? "invalid deflate data")
            }
            if count > maxMessageSize { throw .messageTooBig(limit: maxMessageSize) }
            // Output room left after the call (zlib's avail_out).
            let roomLeft = room - produced
            if raw.availableInput == 0 && roomLeft > 0 { return }
            // No progress with room on both sides cannot happen; never spin on it.
            if produced == 0 && raw.availableInput == inBefore && roomLeft > 0 { return }
        }
    }

    /// Doubles the buffer (from 16 KiB), never beyond `maxMessageSize + 1`: one byte past the
    /// limit is enough to know the message is too big.
    private func grow() throws(WebSocketError) {
        let cap = maxMessageSize + 1
        if capacity >= cap { throw .messageTooBig(limit: maxMessageSize) }
        let n = min(max(capacity * 2, Self.initialCapacity), cap)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: n, alignment: 16)
        if let old = buffer {
            fresh.copyMemory(from: old, byteCount: count)
            old.deallocate()
        }
        buffer = fresh
        capacity = n
        peakCapacity = max(peakCapacity, n)
    }
}
