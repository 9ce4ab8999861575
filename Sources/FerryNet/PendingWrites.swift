#if canImport(Glibc)
import Glibc
#endif

/// The write queue of one connection: one contiguous byte buffer of what the socket has not
/// taken yet, flushed with `send` (or `sendmsg` together with a large payload that skips the
/// queue). A burst of small frames costs one system call, and a steady request/response flow
/// touches no allocator and no reference count per message: appends copy into the buffer, a
/// drained buffer just resets its indices. Noncopyable (it owns its memory). Loop-confined.
struct PendingWrites: ~Copyable {
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0
    /// The first byte not yet written.
    private var start = 0
    /// One past the last queued byte.
    private var end = 0

    /// A drained buffer larger than this is given back, so idle connections stay small.
    static let keepLimit = 64 * 1024

    init() {}

    deinit { storage?.deallocate() }

    /// Bytes queued and not yet written.
    var byteCount: Int { end - start }
    var isEmpty: Bool { end == start }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        guard let storage else { return }
        (storage + end).copyMemory(from: src, byteCount: bytes.count)
        end += bytes.count
    }

    /// Room for `n` more bytes at the end: slide the unwritten bytes to the front, or grow.
    private mutating func reserve(_ n: Int) {
        if end + n <= capacity { return }
        if start > 0, let storage {
            memmove(storage, storage + start, end - start)  // the ranges may overlap
            end -= start
            start = 0
            if end + n <= capacity { return }
        }
        let newCapacity = max(capacity * 2, end + n, 4096)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if let storage {
            grown.copyMemory(from: storage + start, byteCount: end - start)
            storage.deallocate()
        }
        end -= start
        start = 0
        storage = grown
        capacity = newCapacity
    }

    /// Writes as much as the socket takes. Returns the errno of a hard failure, or nil.
    mutating func flush(fd: Int32) -> Int32? {
        while let storage, end > start {
            // MSG_NOSIGNAL: a peer that has gone away is an EPIPE error, never a SIGPIPE that
            // kills an embedding application which did not ignore the signal.
            let written = Glibc.send(fd, storage + start, end - start, Int32(MSG_NOSIGNAL))
            if written < 0 {
                let err = errno
                if err == EINTR { continue }
                return err == EAGAIN || err == EWOULDBLOCK ? nil : err
            }
            if written == 0 { return nil }
            consume(written)
        }
        return nil
    }

    /// Writes the queue, then `extra`, in one system call, and queues (copies) only the part
    /// of `extra` the socket did not take: a large payload usually goes from the caller's
    /// buffer to the kernel without an intermediate copy. Returns the errno of a hard
    /// failure, or nil.
    mutating func flush(fd: Int32, then extra: UnsafeRawBufferPointer) -> Int32? {
        guard let base = extra.baseAddress, extra.count > 0 else { return flush(fd: fd) }
        let queued = byteCount
        var written: Int
        repeat {
            if queued == 0 {
                written = Glibc.send(fd, base, extra.count, Int32(MSG_NOSIGNAL))
            } else {
                var iov = (iovec(iov_base: storage.map { $0 + start }, iov_len: queued),
                           iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: extra.count))
                written = withUnsafeMutablePointer(to: &iov) { p in
                    p.withMemoryRebound(to: iovec.self, capacity: 2) { v in
                        var msg = msghdr()
                        msg.msg_iov = v
                        msg.msg_iovlen = 2
                        return Glibc.sendmsg(fd, &msg, Int32(MSG_NOSIGNAL))
                    }
                }
            }
        } while written < 0 && errno == EINTR
        if written < 0 {
            let err = errno
            append(extra)
            return err == EAGAIN || err == EWOULDBLOCK ? nil : err
        }
        if written < queued {
            consume(written)
            append(extra)
            return nil
        }
        if queued > 0 { consume(queued) }
        let taken = written - queued
        if taken < extra.count { append(UnsafeRawBufferPointer(start: base + taken, count: extra.count - taken)) }
        return nil
    }

    private mutating func consume(_ n: Int) {
        start += n
        if start == end {
            start = 0
            end = 0
            if capacity > Self.keepLimit { removeAll() }
        }
    }

    mutating func removeAll() {
        storage?.deallocate()
        storage = nil
        capacity = 0
        start = 0
        end = 0
    }
}
