/// A local (non-replicated) document, e.g. a replication checkpoint. Local documents have
/// their own revision counter (`0-1`, `0-2`, … as in CouchDB), no history, no change feed.
public struct LocalDocument: Sendable, Equatable {
    /// The local document's ID.
    public let id: String
    /// Its revision, `0-<n>`, incremented by every write.
    public let revision: String
    /// Its body.
    public let properties: [String: JSONValue]
}
