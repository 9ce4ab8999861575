/// What `save` and `delete` do when the document changed since it was read (docs/store.md §6:
/// Couchbase Lite's rule for saves — the last write wins unless one change is a deletion).
public enum ConcurrencyControl: Sendable {
    /// The save becomes a child of the current revision, overwriting the other change — unless
    /// the other change was a deletion: deletes win, so the save throws `.conflict`.
    case lastWriteWins
    /// The save throws `StoreError.conflict`.
    case failOnConflict
}

/// Called by `save(_:conflictHandler:)` when the document changed since it was read, with the
/// document being saved (`inout`, may be merged into) and the current one (nil if it is deleted
/// or purged). Return true to save the (possibly merged) document as a child of the current
/// revision, false to give up (the save throws `.conflict`). Runs on the writer: it must not
/// call back into the database.
public typealias ConflictHandler = @Sendable (_ new: inout Document, _ current: Document?) -> Bool
