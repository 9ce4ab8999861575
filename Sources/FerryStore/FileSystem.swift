import Glibc

/// Small things done with files, asked of the system directly: writing a buffer whole, sizes for
/// the daemon's figures and the `ferry` command's reports, and the directory a path is in (to
/// create it, or to fsync it after a rename).
public enum FileSystem {
    /// Writes all of `bytes` to `fd` with write(2), through short writes and interruptions, so
    /// that a buffer goes out whole before the next. Nil when it did; else the errno that stopped
    /// it (EIO for a write that wrote nothing).
    public static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Int32? {
        guard let base = bytes.baseAddress else { return nil }
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, base + offset, bytes.count - offset)
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return n < 0 ? errno : EIO
            }
        }
        return nil
    }

    /// `path`'s size in bytes, as `stat(2)` gives it; 0 when it does not exist or cannot be read.
    public static func size(atPath path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// The directory `path` is in: what precedes its last `/` ("/" for a file at the root, "."
    /// for a bare name).
    public static func directory(of path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.last == "/" { p.removeLast() }
        guard let slash = p.lastIndex(of: "/") else { return "." }
        return slash == p.startIndex ? "/" : String(p[..<slash])
    }
}
