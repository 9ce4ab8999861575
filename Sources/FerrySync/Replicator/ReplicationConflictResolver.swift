import FerryStore
import Foundation

/// How a replicator resolves a conflict it pulled (Protocol/revisions.md, "Resolver input" and "Default resolver").
///
/// A custom resolver gets the conflict — `local` is this database's current revision, `remote`
/// the pulled leaf, nil for a tombstone — and returns the document to keep: `local`, `remote`,
/// a merged document, or nil to delete. The result is stored by adding revisions — the kept
/// leaf stays, a merged body continues the higher leaf, the loser is closed — and pushed back
/// (Protocol/revisions.md, "Storing a resolution"). As Couchbase Lite documents it:
/// - a returned document whose ID is not the conflicting one is saved under the conflicting
///   ID, with a warning in the log;
/// - a document read from another database is an error: a `.failed` document event, and the
///   conflict stays;
/// - a resolver that throws skips that conflict: a `.failed` document event and a log line;
///   the conflict stays and is resolved on the next start (or at `stop()`, which resolves
///   what is pending before it returns).
///
/// Resolvers must be pure functions of their input and should be symmetric, so that two peers
/// converge (Protocol/revisions.md, "Convergence rules").
public struct ReplicationConflictResolver: Sendable {
    let resolve: (@Sendable (Conflict) throws -> Document?)?

    /// The store's default rule: a deletion wins; else the longer branch; else the higher
    /// revision ID. Resolved in the same transaction as the insert.
    public static let `default` = ReplicationConflictResolver(resolve: nil)

    /// A custom resolver.
    public static func custom(_ resolve: @escaping @Sendable (Conflict) throws -> Document?) -> ReplicationConflictResolver {
        ReplicationConflictResolver(resolve: resolve)
    }

    /// What a custom resolver's answer means.
    struct Answer: Equatable {
        /// The store's resolution.
        var resolution: ConflictResolution
        /// Set when the answer was taken with a warning (a document with another ID).
        var warning: String?
    }

    /// Runs a custom resolver and turns its answer into the store's resolution, or an error.
    /// `databaseID`: the database the conflict is in.
    static func resolution(for conflict: Conflict, in databaseID: UUID,
                           using resolve: @Sendable (Conflict) throws -> Document?) throws(ReplicationError) -> Answer {
        let chosen: Document?
        do { chosen = try resolve(conflict) } catch {
            throw .store(.rejected(status: 409, message: "conflict resolver failed: \(error)"))
        }
        guard let doc = chosen else { return Answer(resolution: .delete) }
        if let source = doc.databaseID, source != databaseID {
            throw .store(.rejected(status: 409, message: "conflict resolver returned document \(doc.id) from another database"))
        }
        guard doc.id == conflict.documentID else {
            return Answer(resolution: .merged(doc.properties),
                          warning: "conflict resolver returned document \(doc.id) for \(conflict.documentID); saved as \(conflict.documentID)")
        }
        return Answer(resolution: resolution(of: doc, for: conflict))
    }

    /// The resolution a returned document with the conflict's ID stands for.
    private static func resolution(of doc: Document, for conflict: Conflict) -> ConflictResolution {
        if let r = conflict.remote, doc.revisionID == r.revisionID, doc.properties == r.properties { return .remote }
        if let l = conflict.local, doc.revisionID == l.revisionID, doc.properties == l.properties { return .local }
        return .merged(doc.properties)
    }
}
