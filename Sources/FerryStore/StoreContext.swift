/// What a write transaction needs to know besides the connection: the options, the blob store
/// (to check attachment lengths) and a snapshot of the registered validation functions (in name
/// order, so they run in a stable order).
struct StoreContext: Sendable {
    var options: DatabaseOptions
    var blobs: BlobStore
    var validators: [(name: String, validate: Validator)]
}
