import Glibc

/// Small questions about files, asked of the system directly: sizes for the daemon's figures
/// and the `ferry` command's reports, and the directory a path is in (to create it, or to
/// fsync it after a rename).
public enum FileSystem {
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
