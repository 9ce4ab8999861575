/// The written but not yet framed part of a streamed body: the producer's pieces in order,
/// kept as handed over (no copy into one buffer), each dropped as soon as its last byte is
/// framed. This is what bounds a streamed sender's memory: the connection's writer suspends
/// while `count` is above the configured window.
final class OutgoingBodyQueue {
    private var pieces: [[UInt8]] = []
    /// Index of the first live piece: taking from the front is O(1) per piece.
    private var head = 0
    /// Bytes of `pieces[head]` already framed.
    private var headOffset = 0
    /// Bytes queued and not yet framed.
    private(set) var count = 0

    func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        pieces.append(bytes)
        count += bytes.count
    }

    /// Calls `use` with the next `length` queued bytes (`length` ≤ `count`), copying into
    /// `scratch` only when they span pieces.
    func withFront<R>(_ length: Int, scratch: inout [UInt8],
                      _ use: (UnsafeRawBufferPointer) throws(BLIPError) -> R) throws(BLIPError) -> R {
        // The empty last frame of a body that ended with nothing left to frame.
        guard length > 0 else { return try use(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let first = pieces[head]
        if first.count - headOffset >= length {
            let start = headOffset
            return try first.withUnsafeBytes { raw in
                Result { () throws(BLIPError) in try use(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])) }
            }.get()
        }
        scratch.removeAll(keepingCapacity: true)
        appendFront(length, to: &scratch)
        return try scratch.withUnsafeBytes { raw in Result { () throws(BLIPError) in try use(raw) } }.get()
    }

    /// Appends the next `length` queued bytes to `out` without consuming them.
    func appendFront(_ length: Int, to out: inout [UInt8]) {
        var left = length
        var i = head
        var skip = headOffset
        while left > 0 {
            let piece = pieces[i]
            let n = min(piece.count - skip, left)
            out.append(contentsOf: piece[skip..<(skip + n)])
            left -= n
            skip = 0
            i += 1
        }
    }

    /// Drops the next `length` bytes (they have been framed), freeing finished pieces.
    func consume(_ length: Int) {
        var left = length
        count -= length
        while left > 0 {
            let available = pieces[head].count - headOffset
            if left < available { headOffset += left; return }
            left -= available
            pieces[head] = []
            head += 1
            headOffset = 0
        }
        compactConsumed(&pieces, head: &head)
    }
}
