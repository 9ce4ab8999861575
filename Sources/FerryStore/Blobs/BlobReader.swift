import FoundationEssentials
import Glibc

/// Reads one stored blob in chunks, so a blob of any size is never held in memory whole.
/// Use `read(max:)` in a loop, or `for try await chunk in reader` (chunks of at most
/// `BlobReader.chunkSize` bytes).
///
/// Promises: the reader keeps the file open, so the content stays readable even if a
/// `compact()` removes the blob meanwhile; the file is closed at the end, on `close()` or when
/// the reader is dropped. Not thread-safe: one task reads it. Reads are plain `read(2)` calls
/// on a local file, done on the calling thread.
public final class BlobReader: AsyncSequence {
    /// The largest chunk the async iteration yields (64 KiB).
    public static let chunkSize = 64 * 1024

    /// The blob's digest.
    public let digest: BlobDigest
    /// The blob's size in bytes.
    public let length: Int64
    private var fd: Int32

    init(path: String, digest: BlobDigest) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw errno == ENOENT ? .notFound : .io(operation: "open blob \(digest)", errno: errno) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw .io(operation: "stat blob \(digest)", errno: e)
        }
        self.fd = fd
        self.digest = digest
        self.length = Int64(st.st_size)
    }

    deinit { close() }

    /// The next at most `max` bytes (at least 1 byte unless the blob is exhausted); an empty
    /// array at the end.
    public func read(max: Int = BlobReader.chunkSize) throws(StoreError) -> [UInt8] {
        guard fd >= 0, max > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: max)
        while true {
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, max) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(operation: "read blob \(digest)", errno: errno)
            }
            if n == 0 { close() }
            out.removeSubrange(n...)
            return out
        }
    }

    /// Reads everything that is left (for small blobs).
    public func readAll() throws(StoreError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Int(clamping: length))
        while true {
            let chunk = try read()
            if chunk.isEmpty { return out }
            out.append(contentsOf: chunk)
        }
    }

    /// Closes the file; later reads return nothing. Safe to call twice.
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// The chunks of the blob, each at most `chunkSize` bytes.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = StoreError
        let reader: BlobReader

        /// The next chunk, or nil at the end.
        public mutating func next() async throws(StoreError) -> [UInt8]? {
            let chunk = try reader.read()
            return chunk.isEmpty ? nil : chunk
        }
    }

    public typealias Failure = StoreError

    /// An iterator over the remaining chunks (they share this reader's position).
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: self) }
}
