/// How a `Database` is opened and how it behaves. A value: copy, change, pass to `open`.
public struct DatabaseOptions: Sendable {
    /// How hard a commit is pushed to disk.
    public enum Durability: Sendable {
        /// WAL with `synchronous=NORMAL`: a committed transaction survives the process being
        /// killed (it is in the OS page cache), but the last commits may be lost on power loss.
        case normal
        /// WAL with `synchronous=FULL`: every commit is fsynced; survives power loss too.
        case full
    }

    /// A prebuilt ("shipped") database file copied to the path first if the path does not exist
    /// yet. The copy gets its own UUID.
    public var prebuiltDatabase: String?
    /// Revision trees are pruned to this depth (LiteCore and Sync Gateway default: 50).
    public var maxRevisionTreeDepth: Int = 50
    /// The largest document body accepted, in bytes of JSON.
    public var maxDocumentSize: Int = 20 * 1024 * 1024
    /// Deepest JSON nesting accepted.
    public var maxJSONDepth: Int = 128
    /// Commit durability (default `.normal`).
    public var durability: Durability = .normal
    /// The property that names a document's type for `documents(ofType:)` (indexed).
    public var typeKey: String = "type"
    /// The page size a new database file is created with, in bytes (a power of two from 512
    /// to 65,536, else opening a new file throws `.invalidArgument`; an existing file keeps its
    /// own). SQLite's default is 4 KiB; documents of a KiB or more insert faster with 8 KiB
    /// pages (fewer page headers, WAL frames and write calls per document).
    public var pageSize: Int = 8192
    /// WAL pages after which a background checkpoint copies the WAL into the main file, so
    /// the WAL can start over (8,192: 64 MiB of 8 KiB pages). Each checkpoint fsyncs both
    /// files; SQLite's default (1000) would do it often enough to show in the latency of
    /// single-document commits. Four times this, the writer checkpoints the WAL itself.
    public var walAutoCheckpointPages: Int = 8192
    /// Page-cache size of the write connection, in KiB. 8 MiB holds the pages a stream of
    /// inserts touches (the B-trees' upper levels and right edges); 16 MiB measured no faster
    /// and was a quarter of `ferry serve`'s resident size.
    public var writerCacheKiB: Int = 8192
    /// Added to the nice value of the thread that runs async writes (`Database.write`), on
    /// Linux, where it is per thread; 0 leaves it as the process's. Above 0, the threads that
    /// serve reads (a replication's change feed, GETs) win the CPU over writes when every core
    /// is busy, and writes still get all the CPU nobody else wants: `ferry serve
    /// --writer-nice`, docs/performance.md "Reads under a write storm".
    public var writerNiceness: Int32 = 0

    /// The conflict policy a *new* database file is created with (an existing file keeps the
    /// one recorded in it; `Database.setConflictPolicy(_:)` changes it).
    public var initialConflictPolicy: ConflictPolicy = .resolve
    /// Notice commits made by other processes to the same file (inotify on the WAL), so live
    /// change feeds — continuous replications — see them. Off by default; `ferry serve` turns
    /// it on so that other `ferry` commands can write the database it serves.
    public var watchExternalWrites = false

    public init() {}
}
