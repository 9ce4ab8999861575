import FerryNet
import FerryStore
import Glibc
import Synchronization

/// Where `ferry serve`'s log lines go: standard error, in batches. A busy daemon logs a line
/// per request (the access log); one `write(2)` per line cost ~15 % of its GET rate, so lines
/// are gathered in memory and written by a thread of its own every 50 ms, or at once when
/// the buffer passes 256 KiB (the writer then waits: memory stays bounded when the reader of
/// standard error is slow). Otherwise logging never waits for a write, since lines are taken
/// out of the buffer before they are written. A line at `notice` or above is written before
/// `log` returns, with everything before it, so what explains a failure is never held back;
/// the rest is written at exit (`atexit`), and at most 50 ms of `info` lines are lost to a
/// SIGKILL.
final class LogOutput: Sendable {
    /// Standard error, for the whole process.
    static let standardError: LogOutput = {
        let out = LogOutput(fd: 2)
        atexit { LogOutput.standardError.flush() }
        return out
    }()

    private let fd: Int32
    /// The lines not yet written. Held only to add lines or take them all, never across a
    /// `write(2)`: the event loops log every request here, and a slow reader of standard error
    /// (a full pipe) must not stop them.
    private let buffer = Mutex<[UInt8]>([])
    /// Held across each `write(2)`, so that lines taken by two flushes are written in the order
    /// they were taken and never interleave. Only flushes take it: a line's writer waits here
    /// only when the buffer is full (`flushAt`) or the line is urgent.
    private let writing = Mutex<[UInt8]>([])
    private static let flushAt = 256 * 1024
    private static let intervalMicroseconds: UInt32 = 50_000

    private init(fd: Int32) {
        self.fd = fd
        // Without the thread (resource limits) lines are still written: urgent ones at once,
        // the rest when the buffer fills and at exit.
        try? DetachedThread.start(name: "ferry.log") { [weak self] in
            while let me = self {
                usleep(Self.intervalMicroseconds)
                me.flush()
            }
        }
    }

    /// Adds one line (with its newline); `urgent` writes it, and what came before, now.
    func write(_ line: [UInt8], urgent: Bool) {
        let now = buffer.withLock { b in
            b += line
            return urgent || b.count >= Self.flushAt
        }
        if now { flush() }
    }

    /// Writes what is buffered.
    func flush() {
        writing.withLock { spare in
            // The buffer is swapped with the (empty) spare, keeping both arrays' capacity.
            buffer.withLock { swap(&$0, &spare) }
            guard !spare.isEmpty else { return }
            _ = spare.withUnsafeBytes { FileSystem.write($0, to: fd) }
            spare.removeAll(keepingCapacity: true)
        }
    }
}
