/// Every number that sets how much replication keeps in flight and how it batches work, in one
/// place, with the values that follow from others derived here rather than kept in step by
/// hand. Measured against alternatives in docs/performance.md; see docs/sync.md for how the
/// window, the ledger and the inserter use them.
enum ReplicatorTuning {
    // MARK: Batches and windows

    /// Documents per `changes`/`proposeChanges` message: 500, as CouchDB's replicator
    /// (`worker_batch_size`) and LiteCore's first puller. A pull feed keeps one batch of `rev`s
    /// unanswered, so the batch sets how full the pipe stays; it is also the most a killed
    /// puller is sent again.
    static let batchSize = 500

    /// Batches an active push keeps in flight: proposing the next while earlier revisions are
    /// stored, each checkpointed in order.
    static let pushBatchesInFlight = 4

    /// Revisions a puller lets be pending before it takes no further `changes` message, for a
    /// given batch size: as many as a Ferry pusher keeps in flight (a Ferry feed has at most
    /// three and a half batches pending when the next `changes` comes), so against a Ferry
    /// peer the gate never closes; it bounds a peer without a window of its own.
    static func maxPendingRevisions(batchSize: Int) -> Int { max(1, batchSize) * pushBatchesInFlight }

    /// The batch size a `subChanges` without one gets, and the most a feed accepts.
    static let feedBatchSize = 200
    static let feedBatchLimit = 1000

    // MARK: Storing

    /// The most revisions one transaction of a pull takes, for the feeder's window (one batch):
    /// half of it, so the feeder keeps sending the other half while the transaction commits;
    /// never more than 200 (longer transactions delay every reply in them).
    static func pullTransactionSize(feederWindow: Int) -> Int { max(1, min(200, feederWindow / 2)) }

    /// A pull's transaction smaller than this waits up to `lingerTime` for revisions on their
    /// way: without it a stream splits into many transactions of a few revisions, each paying
    /// a commit. Kept at or under half the feeder's window, so the feeder is never stalled
    /// waiting on a batch.
    static func lingerBatch(feederWindow: Int) -> Int { max(1, min(64, feederWindow / 2)) }

    /// How long a small transaction waits for revisions on their way.
    static let lingerTime: Duration = .milliseconds(2)

    /// The most revisions one transaction takes when a client pushes to a listener: a whole
    /// default batch, since a Ferry pusher keeps `pushBatchesInFlight` of them in flight and
    /// fewer commits rewrite the indexes' hot pages less.
    static let passiveTransactionSize = batchSize

    // MARK: Messages

    /// Ancestors sent in a `rev`'s history (LiteCore's default `maxHistory`).
    static let maxHistory = 50

    /// Ancestors named per entry in an answer to `changes` (Couchbase Lite sends up to 10).
    static let maxKnownRevisions = 10

    /// `rev` bodies at least this long are sent compressed (smaller ones cost more CPU than
    /// compression saves).
    static let compressThreshold = 4096

    // MARK: Checkpoints

    /// The shortest time between two saves of pushed progress while a push is under way.
    static let pushSaveInterval: Duration = .seconds(1)

    /// Changes read per page when listing pending documents or scanning the database.
    static let scanPageSize = 1000
}
