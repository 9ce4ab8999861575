import Foundation

/// Where `ferry serve`'s log lines go: standard error, in batches. A busy daemon logs a line
/// per request (the access log); one `write(2)` per line cost ~15 % of its GET rate, so lines
/// are gathered in memory and written by a thread of its own every 50 ms, or at once when
/// the buffer passes 256 KiB (the writer then waits: memory stays bounded when the reader of
/// standard error is slow). A line at `notice` or above is written before `log` returns, with
/// everything before it, so what explains a failure is never held back; the rest is written
/// at exit (`atexit`), and at most 50 ms of `info` lines are lost to a SIGKILL.
final class LogOutput: @unchecked Sendable {
    // @unchecked: `buffer` and `flushing` are read and written only with `lock` held, and
    // `fd` is immutable; the writer thread only touches them through `takeAndWrite`.

    /// Standard error, for the whole process.
    static let standardError: LogOutput = {
        let out = LogOutput(fd: 2)
        atexit { LogOutput.standardError.flush() }
        return out
    }()

    private let fd: Int32
    private let lock = NSCondition()
    private var buffer: [UInt8] = []
    private static let flushAt = 256 * 1024
    private static let interval = 0.05

    private init(fd: Int32) {
        self.fd = fd
        let thread = Thread { [weak self] in
            while let me = self {
                me.lock.lock()
                _ = me.lock.wait(until: Date(timeIntervalSinceNow: Self.interval))
                me.lock.unlock()
                me.flush()
            }
        }
        thread.name = "ferry.log"
        thread.start()
    }

    /// Adds one line (with its newline); `urgent` writes it, and what came before, now.
    func write(_ line: [UInt8], urgent: Bool) {
        lock.lock()
        buffer += line
        let now = urgent || buffer.count >= Self.flushAt
        lock.unlock()
        if now { flush() }
    }

    /// Writes what is buffered. Under the lock, so lines from two flushes never interleave.
    func flush() {
        lock.lock()
        defer { lock.unlock() }
        guard !buffer.isEmpty else { return }
        buffer.withUnsafeBytes { b in
            guard let base = b.baseAddress else { return }
            var off = 0
            while off < b.count {
                let n = Foundation.write(fd, base + off, b.count - off)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                off += n
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }
}
