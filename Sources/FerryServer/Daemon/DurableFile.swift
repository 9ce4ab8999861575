import FerryStore
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// The daemon's small files (users, replications, endpoint), replaced whole: written to a
/// temporary file (mode 0600: they hold hashes, credentials and tokens), synced, renamed over
/// the old one, and the directory synced — so a process killed at any moment, or a power cut,
/// leaves either the old file or the new one, and a reader never sees half of one.
enum DurableFile {
    /// Replaces `path` with `bytes`; the error says what the file system refused.
    static func write(_ bytes: [UInt8], to path: String) throws(DurableFileError) {
        let tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw DurableFileError("cannot write \(tmp): errno \(errno)") }
        if let e = bytes.withUnsafeBytes({ FileSystem.write($0, to: fd) }) {
            close(fd)
            throw DurableFileError("cannot write \(tmp): errno \(e)")
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw DurableFileError("cannot sync \(tmp): errno \(errno)")
        }
        close(fd)
        guard rename(tmp, path) == 0 else { throw DurableFileError("cannot rename \(tmp) to \(path): errno \(errno)") }
        let dir = open(FileSystem.directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }
}

/// What the file system refused, for people.
struct DurableFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
