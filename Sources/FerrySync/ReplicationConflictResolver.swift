import FerryStore

/// How a replicator resolves a conflict it pulled (reference §4.4–4.6, seed on conflicts).
///
/// A custom resolver gets the conflict — `local` is this database's current revision, `remote`
/// the pulled leaf, nil for a tombstone — and returns the document to keep: `local`, `remote`,
/// a merged document (same ID), or nil to delete. The result is stored as a child of the
/// remote leaf (so it reaches the peer as a fast-forward) and pushed back. A resolver that
/// throws, or returns a document with another ID, produces a `.failed` document event and
/// leaves the conflict in the database for the next run. Resolvers must be pure functions of
/// their input and should be symmetric, so that two peers converge (reference §4.7).
public struct ReplicationConflictResolver: Sendable {
    let resolve: (@Sendable (Conflict) throws -> Document?)?

    /// The store's default rule: a deletion wins; else the longer branch; else the higher
    /// revision ID. Resolved in the same transaction as the insert.
    public static let `default` = ReplicationConflictResolver(resolve: nil)

    /// A custom resolver.
    public static func custom(_ resolve: @escaping @Sendable (Conflict) throws -> Document?) -> ReplicationConflictResolver {
        ReplicationConflictResolver(resolve: resolve)
    }

    /// Runs a custom resolver and turns its answer into the store's resolution, or an error.
    static func resolution(for conflict: Conflict,
                           using resolve: @Sendable (Conflict) throws -> Document?) throws(ReplicationError) -> ConflictResolution {
        let chosen: Document?
        do { chosen = try resolve(conflict) } catch {
            throw .store(.rejected(status: 409, message: "conflict resolver failed: \(error)"))
        }
        guard let doc = chosen else { return .delete }
        guard doc.id == conflict.documentID else {
            throw .store(.rejected(status: 409, message: "conflict resolver returned document \(doc.id) for \(conflict.documentID)"))
        }
        if let r = conflict.remote, doc.revisionID == r.revisionID, doc.properties == r.properties { return .remote }
        if let l = conflict.local, doc.revisionID == l.revisionID, doc.properties == l.properties { return .local }
        return .merged(doc.properties)
    }
}
