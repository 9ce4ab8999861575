#if canImport(Glibc)
import Glibc
#endif

/// The write queue of one connection: byte chunks waiting for the socket, flushed with
/// `writev`. Small writes are coalesced into the tail chunk so a burst of small frames costs
/// one system call; large ones keep their own chunk and are never copied again. Loop-confined.
struct PendingWrites {
    private var chunks: [[UInt8]] = []
    /// Bytes of `chunks[0]` already written.
    private var headOffset = 0
    /// Bytes queued and not yet written.
    private(set) var byteCount = 0

    /// Chunks under this size are merged into the tail chunk.
    static let coalesceLimit = 16 * 1024

    var isEmpty: Bool { byteCount == 0 }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        byteCount += bytes.count
        if bytes.count < Self.coalesceLimit, !chunks.isEmpty, chunks.count > 1 || headOffset == 0,
           chunks[chunks.count - 1].count + bytes.count <= 4 * Self.coalesceLimit {
            chunks[chunks.count - 1].append(contentsOf: bytes)
        } else {
            var c = [UInt8]()
            c.reserveCapacity(max(bytes.count, 4096))
            c.append(contentsOf: bytes)
            chunks.append(c)
        }
    }

    mutating func append(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        if chunk.count < Self.coalesceLimit {
            chunk.withUnsafeBytes { append($0) }
            return
        }
        byteCount += chunk.count
        chunks.append(chunk)
    }

    /// Writes as much as the socket takes. Returns the errno of a hard failure, or nil.
    mutating func flush(fd: Int32) -> Int32? {
        while byteCount > 0 {
            let n = min(chunks.count, 64)
            var iov = [iovec](repeating: iovec(), count: n)
            // The arrays are not mutated until writev returns, so their storage stays put.
            var written = 0
            var err: Int32 = 0
            withIOVecs(count: n, into: &iov) { iovs in
                written = Glibc.writev(fd, iovs, Int32(n))
                if written < 0 { err = errno }
            }
            if written < 0 {
                if err == EAGAIN || err == EWOULDBLOCK { return nil }
                if err == EINTR { continue }
                return err
            }
            consume(written)
            if written == 0 { return nil }
        }
        return nil
    }

    private func withIOVecs(count n: Int, into iov: inout [iovec], _ body: (UnsafePointer<iovec>) -> Void) {
        // Recursion pins each chunk's buffer for the duration of the call.
        func pin(_ i: Int, _ iov: UnsafeMutablePointer<iovec>) {
            if i == n { body(iov); return }
            chunks[i].withUnsafeBytes { raw in
                let off = i == 0 ? headOffset : 0
                iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + off),
                               iov_len: raw.count - off)
                pin(i + 1, iov)
            }
        }
        iov.withUnsafeMutableBufferPointer { pin(0, $0.baseAddress!) }
    }

    private mutating func consume(_ n: Int) {
        var n = n
        byteCount -= n
        while n > 0 {
            let left = chunks[0].count - headOffset
            if n >= left {
                n -= left
                chunks.removeFirst()
                headOffset = 0
            } else {
                headOffset += n
                n = 0
            }
        }
        if chunks.isEmpty { headOffset = 0 }
    }

    mutating func removeAll() { chunks = []; headOffset = 0; byteCount = 0 }
}
