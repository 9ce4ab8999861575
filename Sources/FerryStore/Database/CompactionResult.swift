/// What `Database.compact()` removed.
public struct CompactionResult: Sendable, Equatable {
    /// Blob files referenced by no stored revision, deleted.
    public var blobsRemoved = 0
    /// Their total size in bytes.
    public var bytesFreed: Int64 = 0
    /// Temp files of blob writes that never finished (a crash, a dropped writer in another
    /// process), deleted.
    public var tempFilesRemoved = 0

    /// An empty result.
    public init() {}
}
