import FoundationEssentials
import Glibc

/// Streams one blob into the store chunk by chunk, hashing as it goes, so a blob of any size
/// needs no more memory than one chunk. Get one from `Database.makeBlobWriter()`, `write` the
/// bytes, then `finish()`.
///
/// Promises: until `finish()` returns, nothing exists under the blob's digest name (the bytes
/// go to a temp file); `finish()` fsyncs, then renames atomically. A writer dropped or
/// `cancel()`led before finishing removes its temp file. Not thread-safe: one task drives it.
public final class BlobWriter {
    private let store: BlobStore
    private let tempName: String
    private var fd: Int32
    private let hash: SHA1Stream
    private var length: Int64 = 0
    private var done = false

    init(store: BlobStore) throws(StoreError) {
        let hash = try SHA1Stream()
        let (name, fd) = try store.createTempFile()
        self.store = store
        self.tempName = name
        self.fd = fd
        self.hash = hash
    }

    deinit { cancel() }

    /// Appends `bytes` to the blob.
    public func write(_ bytes: [UInt8]) throws(StoreError) {
        // Typed throws do not pass through withUnsafeBytes: carry the error out in a Result.
        let result = bytes.withUnsafeBytes { buf in Result { () throws(StoreError) in try write(buf) } }
        try result.get()
    }

    /// Appends the bytes in `buffer` to the blob (no copy).
    public func write(_ buffer: UnsafeRawBufferPointer) throws(StoreError) {
        guard !done else { throw .invalidArgument("blob writer already finished") }
        hash.update(buffer)
        if let e = FileSystem.write(buffer, to: fd) {
            cancel()
            throw .io(operation: "write blob", errno: e)
        }
        length += Int64(buffer.count)
    }

    /// Makes the blob durable under its digest name and returns its metadata. Writing the
    /// same content again is harmless: the result is the same single file.
    public func finish() throws(StoreError) -> BlobMetadata {
        guard !done else { throw .invalidArgument("blob writer already finished") }
        // The data must be on disk before the name points at it, or a power cut could leave a
        // short file under a digest name.
        if fsync(fd) != 0 {
            let e = errno
            cancel()
            throw .io(operation: "fsync blob", errno: e)
        }
        Glibc.close(fd)
        fd = -1
        done = true
        defer { store.releaseTempFile(tempName) }
        let digest = BlobDigest(bytes: hash.finish())
        try store.install(tempName: tempName, as: digest)
        return BlobMetadata(digest: digest, length: length)
    }

    /// Abandons the blob: the temp file is removed and nothing is stored. Safe to call twice.
    public func cancel() {
        guard !done else { return }
        done = true
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        unlink(store.directory + "/" + tempName)
        store.releaseTempFile(tempName)
    }
}
