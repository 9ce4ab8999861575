/// A streamed incoming body on its way from the session, which appends each frame's bytes,
/// to its one reader, which takes them in chunks. What it buffers is what the reader has not
/// taken yet; the session withholds the message's ACKs while that is above the window, so a
/// slow reader stops its sender instead of growing this buffer.
///
/// Safety of `@unchecked Sendable`: it is handed across tasks only so that a reader's
/// iterator can carry it; every read or write of its state happens on the owning
/// connection's event loop (the session runs there, and the reader hops there for each chunk).
final class IncomingBody: @unchecked Sendable {
    /// Small frames are coalesced into chunks up to this size (fewer hops for the reader).
    static let chunkSize = 64 * 1024

    /// The message's kind and number, which find it again to send a withheld ACK.
    let type: BLIPMessageType
    let number: UInt64
    private var chunks: [[UInt8]] = []
    private var head = 0
    /// Bytes received and not yet taken by the reader.
    private(set) var bufferedBytes = 0
    /// The last frame arrived.
    private(set) var finished = false
    /// Why the body cannot complete (the connection closed or broke the protocol).
    private(set) var failure: BLIPError?
    /// The reader, when it waits for bytes: called once with a chunk, nil at the end, or the
    /// failure.
    var waiter: ((Result<[UInt8]?, BLIPError>) -> Void)?
    /// An ACK came due while the reader was behind; it is sent once the reader catches up.
    var ackWithheld = false
    /// The reader is gone: bytes are dropped and ACKs flow, so the sender is not stuck.
    private(set) var discarding = false
    /// Told `true` when the buffer passes `hardLimit` and `false` when it is back under
    /// `softLimit` (or the body ends): the connection pauses reading the socket meanwhile.
    var onPressure: ((Bool) -> Void)?
    private var underPressure = false
    let softLimit: Int
    let hardLimit: Int

    init(type: BLIPMessageType, number: UInt64, window: Int) {
        self.type = type
        self.number = number
        softLimit = window
        // ACK withholding bounds uncompressed bodies near window + 128,000 bytes; this catches
        // compressed ones, whose 128,000 wire bytes may inflate to far more.
        hardLimit = 4 * window
    }

    /// A body that arrived whole (a one-frame message sent to a streaming reader).
    convenience init(type: BLIPMessageType, number: UInt64, whole: [UInt8]) {
        self.init(type: type, number: number, window: max(whole.count, 1))
        if !whole.isEmpty { chunks.append(whole); bufferedBytes = whole.count }
        finished = true
    }

    /// Whether the reader is behind: ACKs of this message wait.
    var isBehind: Bool { bufferedBytes >= softLimit }

    /// Adds received bytes, in chunks of at most `chunkSize` (a compressed frame may inflate
    /// to far more than one).
    func append(_ raw: UnsafeRawBufferPointer) {
        guard !raw.isEmpty, !discarding, !finished, failure == nil else { return }
        var rest = raw
        if let w = waiter {
            waiter = nil
            let n = min(rest.count, Self.chunkSize)
            w(.success(Array(UnsafeRawBufferPointer(rebasing: rest[..<n]))))
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
        while !rest.isEmpty {
            let n: Int
            if head < chunks.count, chunks[chunks.count - 1].count < Self.chunkSize {
                n = min(Self.chunkSize - chunks[chunks.count - 1].count, rest.count)
                chunks[chunks.count - 1].append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
            } else {
                n = min(Self.chunkSize, rest.count)
                var c: [UInt8] = []
                c.reserveCapacity(Self.chunkSize)
                c.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
                chunks.append(c)
            }
            bufferedBytes += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        }
        if !underPressure && bufferedBytes > hardLimit {
            underPressure = true
            onPressure?(true)
        }
    }

    /// The last frame arrived.
    func finish() {
        guard !finished, failure == nil else { return }
        finished = true
        if let w = waiter {
            waiter = nil
            w(.success(nil))
        }
        // Nothing more can arrive for it, so it no longer needs the socket paused.
        relievePressure()
    }

    /// Ends the body with an error; what was buffered is dropped (the body is incomplete).
    func fail(_ error: BLIPError) {
        guard !finished, failure == nil else { return }
        failure = error
        dropBuffered()
        if let w = waiter {
            waiter = nil
            w(.failure(error))
        }
    }

    /// The reader is gone.
    func discard() {
        discarding = true
        dropBuffered()
        if let w = waiter {
            waiter = nil
            w(.success(nil))
        }
    }

    /// The next buffered chunk, or nil if none is buffered.
    func take() -> [UInt8]? {
        guard head < chunks.count else { return nil }
        let c = chunks[head]
        chunks[head] = []
        head += 1
        compactConsumed(&chunks, head: &head)
        bufferedBytes -= c.count
        if bufferedBytes <= softLimit { relievePressure() }
        return c
    }

    private func dropBuffered() {
        chunks = []
        head = 0
        bufferedBytes = 0
        relievePressure()
    }

    private func relievePressure() {
        guard underPressure else { return }
        underPressure = false
        onPressure?(false)
    }
}
