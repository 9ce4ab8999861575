/// What a database does with a conflict (Protocol/revisions.md, "Conflict policy"): two live
/// leaves of one document, or an edit beside a deletion.
///
/// Either way every revision a replicator hands the store is kept; the policy only decides
/// whether the store adds revisions that settle the conflict.
public enum ConflictPolicy: String, Sendable, CaseIterable, Codable {
    /// Settle conflicts as they arrive by adding revisions (the default): the winner under the
    /// default rule stays, each losing live leaf is closed by a tombstone child — Couchbase
    /// Lite's behaviour, and the same winner CouchDB's rule picks from the resulting tree.
    case resolve
    /// Keep every leaf, as CouchDB does: conflicts stay listed (`_conflicts`,
    /// `Database.conflicts(of:)`) until the application resolves them.
    case keep

    /// The resolver a replicated insert runs in its transaction under this policy: the
    /// default rule for `.resolve`, none for `.keep`.
    public var automaticResolver: ConflictResolver? {
        switch self {
        case .resolve: return .default
        case .keep: return nil
        }
    }
}
