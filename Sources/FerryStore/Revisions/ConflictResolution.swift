/// What a custom `ConflictResolver` decides for a `Conflict`. Each is stored by adding
/// revisions, never removing one (Protocol/revisions.md, "Storing a resolution"; docs/store.md §4).
public enum ConflictResolution: Sendable, Equatable {
    /// Keep the local leaf as it is; the remote one, if live, is closed by a tombstone child.
    case local
    /// Keep the remote leaf as it is; the local one, if live, is closed by a tombstone child.
    case remote
    /// A new body, stored as a child of the higher of the two leaves; the other is closed.
    case merged([String: JSONValue])
    /// Delete the document (a Couchbase Lite resolver returning nil): a deletion already on
    /// one side wins as it is, else a tombstone child of the higher leaf; the other is closed.
    case delete
}
