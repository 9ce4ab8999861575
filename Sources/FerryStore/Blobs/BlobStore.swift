import FoundationEssentials
import Glibc
import Synchronization

/// The blob folder beside a database (`<db>.attachments/`): one file per distinct content,
/// named by the digest in hex with `.blob`, so a blob referenced by any number of documents is
/// stored once. docs/store.md §10 says why files rather than SQLite.
///
/// Crash safety: a blob is streamed into `incoming-<UUID>.tmp`, fsync'd, then renamed to its
/// digest name and the folder fsync'd. A crash leaves at most a temp file, which never looks
/// like a blob (other suffix) and which `compact()` removes; a `.blob` file always holds the
/// complete content of its digest.
final class BlobStore: Sendable {
    static let folderSuffix = ".attachments"
    static let blobSuffix = ".blob"
    static let tempPrefix = "incoming-"
    static let tempSuffix = ".tmp"

    private struct State {
        var closed = false
        /// Blobs written by this instance and not yet seen referenced by a compaction: the
        /// window between `writeBlob` and the save that references it must not lose the blob.
        var unreferencedWrites: Set<BlobDigest> = []
        /// Temp files of writers still open, which compaction must leave alone.
        var openTempFiles: Set<String> = []
    }

    let directory: String
    private let state = Mutex(State())

    init(databasePath: String) {
        directory = databasePath + Self.folderSuffix
    }

    func close() { state.withLock { $0.closed = true } }

    func checkOpen() throws(StoreError) {
        if state.withLock({ $0.closed }) { throw .closed }
    }

    func path(of digest: BlobDigest) -> String { directory + "/" + digest.fileName }

    /// The digest a file name in the folder stands for; nil for temp files and strangers.
    static func digest(fromFileName name: String) -> BlobDigest? {
        guard name.hasSuffix(blobSuffix) else { return nil }
        let hex = name.dropLast(blobSuffix.count)
        guard hex.utf8.count == 40, let bytes = Hex.decode(hex) else { return nil }
        return BlobDigest(bytes: bytes)
    }

    /// The stored size of a blob, or nil if it is not here.
    func length(of digest: BlobDigest) -> Int64? {
        var st = stat()
        guard stat(path(of: digest), &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    // MARK: - Writing

    /// Creates the folder if needed and a new temp file in it, registered as open.
    func createTempFile() throws(StoreError) -> (name: String, fd: Int32) {
        try checkOpen()
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw .io(operation: "mkdir \(directory)", errno: errno)
        }
        let name = Self.tempPrefix + UUID().uuidString + Self.tempSuffix
        // Registered before it exists: a compaction listing the folder between the open and
        // the registration would otherwise take it for a crashed writer's file and unlink it.
        state.withLock { _ = $0.openTempFiles.insert(name) }
        let fd = open(directory + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let e = errno
            releaseTempFile(name)
            throw .io(operation: "create \(name)", errno: e)
        }
        return (name, fd)
    }

    /// Forgets an open temp file (after it was renamed or removed).
    func releaseTempFile(_ name: String) {
        state.withLock { _ = $0.openTempFiles.remove(name) }
    }

    /// Moves a complete, fsync'd temp file to its digest name. The digest is protected from
    /// compaction *before* the rename, so a concurrent `compact()` either ran before the file
    /// existed or sees it protected.
    func install(tempName: String, as digest: BlobDigest) throws(StoreError) {
        state.withLock { _ = $0.unreferencedWrites.insert(digest) }
        let temp = directory + "/" + tempName
        // rename(2) replaces an existing file atomically; an existing file under this name has
        // the same content (same digest), so either one is right.
        guard rename(temp, path(of: digest)) == 0 else {
            let e = errno
            unlink(temp)
            throw .io(operation: "rename \(tempName)", errno: e)
        }
        try syncDirectory()
    }

    /// fsync on the folder makes the rename itself durable.
    func syncDirectory() throws(StoreError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open \(directory)", errno: errno) }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw .io(operation: "fsync \(directory)", errno: errno) }
    }

    // MARK: - Compaction

    /// The names in the folder, or nil if it does not exist (yet: a writer may be creating it
    /// right now, which is no error).
    func listFolder() throws(StoreError) -> [String]? {
        guard let dir = opendir(directory) else {
            if errno == ENOENT { return nil }
            throw .io(operation: "list \(directory)", errno: errno)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes every blob not in `referenced` (and not written by this instance since it was
    /// last seen referenced), and every temp file no open writer owns. The caller holds the
    /// database's writer, so no save can add a reference meanwhile.
    func removeUnreferenced(keeping referenced: Set<BlobDigest>) throws(StoreError) -> CompactionResult {
        try checkOpen()
        var result = CompactionResult()
        guard let names = try listFolder() else { return result }     // no blob ever written
        for name in names {
            let full = directory + "/" + name
            if let digest = Self.digest(fromFileName: name) {
                // Decide and unlink under the lock, so `install` cannot slip in between.
                let size = state.withLock { s -> Int64? in
                    if referenced.contains(digest) {
                        s.unreferencedWrites.remove(digest)
                        return nil
                    }
                    if s.unreferencedWrites.contains(digest) { return nil }
                    var st = stat()
                    guard stat(full, &st) == 0, unlink(full) == 0 else { return nil }
                    return Int64(st.st_size)
                }
                if let size {
                    result.blobsRemoved += 1
                    result.bytesFreed += size
                }
            } else if name.hasPrefix(Self.tempPrefix) && name.hasSuffix(Self.tempSuffix) {
                let removed = state.withLock { s -> Bool in
                    !s.openTempFiles.contains(name) && unlink(full) == 0
                }
                if removed { result.tempFilesRemoved += 1 }
            }
        }
        return result
    }
}
