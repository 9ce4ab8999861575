import Glibc

/// Where a command writes its output: a file it creates (or truncates), or standard output.
/// Plain `write(2)` calls: each chunk goes out whole before the next, so a reader of a pipe
/// sees complete lines.
final class OutputFile {
    private let fd: Int32
    private let name: String
    private let owned: Bool

    /// The file at `path`, created with mode 0644 (or truncated); standard output when nil.
    init(path: String?) throws(CommandFailure) {
        guard let path else {
            (fd, name, owned) = (1, "standard output", false)
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CommandFailure("cannot write \(path): \(String(cString: strerror(errno)))") }
        (self.fd, name, owned) = (fd, path, true)
    }

    deinit { if owned { close(fd) } }

    /// Writes all of `bytes`; a failure (a full disk, a closed pipe) is a `CommandFailure`.
    func write(_ bytes: [UInt8]) throws(CommandFailure) {
        let failed: Int32? = bytes.withUnsafeBytes { b in
            var off = 0
            while off < b.count, let base = b.baseAddress {
                let n = Glibc.write(fd, base + off, b.count - off)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return n < 0 ? errno : EIO }
                off += n
            }
            return nil
        }
        if let failed { throw CommandFailure("cannot write \(name): \(String(cString: strerror(failed)))") }
    }
}

/// The process's standard streams, for what `print` does not cover.
enum StandardStreams {
    /// Writes `text` to standard error as it is (no newline added); errors are ignored, as
    /// there is nowhere left to report them.
    static func writeError(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { b in
            var off = 0
            while off < b.count, let base = b.baseAddress {
                let n = Glibc.write(2, base + off, b.count - off)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                off += n
            }
        }
    }

    /// Everything on standard input up to its end; nil when it cannot be read.
    static func readInput() -> [UInt8]? {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return out }
            out += chunk[..<n]
        }
    }
}
