#if canImport(Glibc)
import Glibc
#endif

/// The write queue of one connection: byte chunks waiting for the socket, flushed with
/// `send` (one chunk) or `sendmsg` (several). Small writes are coalesced into the tail chunk so
/// a burst of small frames costs one system call; large ones keep their own chunk and are never
/// copied again. The buffer of a drained chunk is kept for the next write, so a steady
/// request/response flow allocates nothing per message. Loop-confined.
struct PendingWrites {
    private var chunks: [[UInt8]] = []
    /// Bytes of `chunks[0]` already written.
    private var headOffset = 0
    /// Bytes queued and not yet written.
    private(set) var byteCount = 0
    /// An empty buffer kept from a drained chunk, reused by the next small write.
    private var spare: [UInt8] = []

    /// Chunks under this size are merged into the tail chunk.
    static let coalesceLimit = 16 * 1024
    /// Drained buffers up to this capacity are kept for reuse.
    static let spareLimit = 64 * 1024

    var isEmpty: Bool { byteCount == 0 }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        byteCount += bytes.count
        if bytes.count < Self.coalesceLimit, !chunks.isEmpty, chunks.count > 1 || headOffset == 0,
           chunks[chunks.count - 1].count + bytes.count <= 4 * Self.coalesceLimit {
            chunks[chunks.count - 1].append(contentsOf: bytes)
            return
        }
        var c: [UInt8]
        if spare.capacity >= bytes.count {
            c = spare
            spare = []
        } else {
            c = []
            c.reserveCapacity(max(bytes.count, 4096))
        }
        c.append(contentsOf: bytes)
        chunks.append(c)
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
            let written = chunks.count == 1 ? writeHead(fd: fd) : writeVector(fd: fd)
            if written < 0 {
                let err = errno
                if err == EAGAIN || err == EWOULDBLOCK { return nil }
                if err == EINTR { continue }
                return err
            }
            if written == 0 { return nil }
            consume(written)
        }
        return nil
    }

    private func writeHead(fd: Int32) -> Int {
        chunks[0].withUnsafeBytes { raw in
            // MSG_NOSIGNAL: a peer that has gone away is an EPIPE error, never a SIGPIPE that
            // kills an embedding application which did not ignore the signal.
            Glibc.send(fd, raw.baseAddress! + headOffset, raw.count - headOffset, Int32(MSG_NOSIGNAL))
        }
    }

    /// Writes the queue, then `extra`, with as few system calls as the socket allows, and
    /// queues (copies) only the part of `extra` it did not take: a large payload usually goes
    /// from the caller's buffer to the kernel without an intermediate copy. Returns the errno
    /// of a hard failure, or nil.
    mutating func flush(fd: Int32, then extra: UnsafeRawBufferPointer) -> Int32? {
        guard chunks.count < 64, let base = extra.baseAddress else {
            append(extra)
            return flush(fd: fd)
        }
        var written: Int
        repeat {
            written = writeVector(fd: fd, extra: extra)
        } while written < 0 && errno == EINTR
        if written < 0 {
            let err = errno
            append(extra)
            return err == EAGAIN || err == EWOULDBLOCK ? nil : err
        }
        let queued = byteCount
        if written < queued {
            consume(written)
            append(extra)
            return nil
        }
        if queued > 0 { consume(queued) }
        let rest = extra.count - (written - queued)
        if rest > 0 { append(UnsafeRawBufferPointer(start: base + (extra.count - rest), count: rest)) }
        return nil
    }

    private func writeVector(fd: Int32, extra: UnsafeRawBufferPointer? = nil) -> Int {
        let n = min(chunks.count, 64)
        let total = n + (extra == nil ? 0 : 1)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: total) { iov in
            // Recursion pins each chunk's buffer until writev returns.
            func pin(_ i: Int) -> Int {
                if i == n {
                    if let extra, let b = extra.baseAddress {
                        iov[n] = iovec(iov_base: UnsafeMutableRawPointer(mutating: b), iov_len: extra.count)
                    }
                    var msg = msghdr()
                    msg.msg_iov = iov.baseAddress
                    msg.msg_iovlen = total
                    return Glibc.sendmsg(fd, &msg, Int32(MSG_NOSIGNAL))
                }
                return chunks[i].withUnsafeBytes { raw in
                    let off = i == 0 ? headOffset : 0
                    iov[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + off), iov_len: raw.count - off)
                    return pin(i + 1)
                }
            }
            return pin(0)
        }
    }

    private mutating func consume(_ n: Int) {
        var n = n
        byteCount -= n
        if byteCount == 0 {
            // The usual case: everything went out. Keep the last buffer as the spare and empty
            // the chunk list in place (no element shifting, no reallocation).
            let last = chunks.count - 1
            if chunks[last].capacity <= Self.spareLimit && chunks[last].capacity > spare.capacity {
                swap(&spare, &chunks[last])
                spare.removeAll(keepingCapacity: true)
            }
            chunks.removeAll(keepingCapacity: true)
            headOffset = 0
            return
        }
        while n > 0 {
            let left = chunks[0].count - headOffset
            if n >= left {
                n -= left
                var done = chunks.removeFirst()
                headOffset = 0
                if done.capacity <= Self.spareLimit && done.capacity > spare.capacity {
                    done.removeAll(keepingCapacity: true)
                    spare = done
                }
            } else {
                headOffset += n
                n = 0
            }
        }
    }

    mutating func removeAll() { chunks = []; headOffset = 0; byteCount = 0; spare = [] }
}
