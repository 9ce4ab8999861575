import FoundationEssentials

/// What a write transaction needs to know besides the connection: the options, the blob store
/// (to check attachment lengths) and a snapshot of the registered validation functions (in name
/// order, so they run in a stable order).
struct StoreContext: Sendable {
    /// The database's UUID: the documents a transaction hands out (to a conflict resolver) carry it.
    var databaseID: UUID
    var options: DatabaseOptions
    var blobs: BlobStore
    /// `options.typeKey` split at dots: the path of the value kept in `docs.doc_type`.
    var typePath: [String]
    /// Its UTF-8 when it is one top-level key (then the scanner captures it), else empty.
    var typeKeyBytes: [UInt8]
    var validators: [(name: String, validate: Validator)]
    /// The database's conflict policy when the transaction began.
    var conflictPolicy: ConflictPolicy = .resolve
}
