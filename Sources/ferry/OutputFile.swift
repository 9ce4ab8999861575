import FerryStore
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
        if let failed = bytes.withUnsafeBytes({ FileSystem.write($0, to: fd) }) { throw CommandFailure("cannot write \(name): \(String(cString: strerror(failed)))") }
    }
}

/// The process's standard input, read whole (`-` for a file argument).
enum StandardInput {
    /// Everything on standard input up to its end; nil when it cannot be read.
    static func readAll() -> [UInt8]? {
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
