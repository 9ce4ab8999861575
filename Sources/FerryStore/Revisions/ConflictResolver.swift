import FoundationEssentials

/// Decides a conflict between two leaves of a document — the one resolver type of the store
/// API (`Database.resolveConflict(documentID:local:remote:using:)`,
/// `Database.resolveConflicts(of:using:)`, `Database.insert(_:fromRemote:resolver:allowConflicts:)`)
/// and of a replicator (`ReplicatorConfiguration.conflictResolver`).
///
/// Three kinds:
/// - `default`: the default rule (Protocol/revisions.md, "Default resolver").
/// - `custom(_:)` returning a `ConflictResolution`: keep `.local`, keep `.remote`, a
///   `.merged` body, or `.delete`.
/// - `custom(_:)` returning a `Document?` — Couchbase Lite's shape: `conflict.local`,
///   `conflict.remote`, a merged document, or nil to delete. It may throw. As Couchbase Lite
///   documents it: a returned document whose ID is not the conflicting one is saved under the
///   conflicting ID, with a warning in the log; a document read from another database is an
///   error (`StoreError.rejected` with status 409) and the conflict stays; a throw is an error
///   of the same kind and the conflict stays. A replicator reports either as a `.failed`
///   document event and tries again on its next start (or at `stop()`).
///
/// Whatever it decides is stored by adding revisions (Protocol/revisions.md, "Storing a
/// resolution"): the kept leaf stays, a merged body continues the higher leaf, the loser is
/// closed by a tombstone child. A resolver must be a pure function of the conflict and should
/// be symmetric in content (`f(a, b)` and `f(b, a)` give the same body), or peers can diverge
/// (Protocol/revisions.md, "Convergence rules"). It runs inside the store's write transaction
/// (a replicator runs a custom one just after its insert's commit), so it must not write to
/// the database.
public struct ConflictResolver: Sendable {
    /// Which of the three kinds this is.
    enum Rule: Sendable {
        case defaultRule
        case resolution(@Sendable (Conflict) -> ConflictResolution)
        case document(@Sendable (Conflict) throws -> Document?)
    }

    let rule: Rule

    /// The default rule (Protocol/revisions.md, "Default resolver"; Couchbase Lite 3.x): a
    /// deletion wins; otherwise the higher generation ("most revisions") wins; a tie goes to the
    /// higher revision ID. Both peers compare the same two IDs, so they pick the same content.
    public static let `default` = ConflictResolver(rule: .defaultRule)

    /// A custom resolver that answers with the store's resolution: keep `.local`, keep
    /// `.remote`, a `.merged` body, or `.delete`.
    public static func custom(_ resolve: @escaping @Sendable (Conflict) -> ConflictResolution) -> ConflictResolver {
        ConflictResolver(rule: .resolution(resolve))
    }

    /// A custom resolver as Couchbase Lite has it: answers with the document to keep
    /// (`conflict.local`, `conflict.remote`, a merged document) or nil to delete, and may throw
    /// to leave the conflict as it is (see the type's documentation).
    public static func custom(_ resolve: @escaping @Sendable (Conflict) throws -> Document?) -> ConflictResolver {
        ConflictResolver(rule: .document(resolve))
    }

    /// Whether this is the default rule, which a database's `ConflictPolicy` may already run
    /// (a replicator then leaves resolution to the policy).
    package var isDefault: Bool {
        if case .defaultRule = rule { return true }
        return false
    }

    /// The store's resolution of `conflict`, in the database `databaseID`; with `warning` set
    /// when it was taken with one (a document with another ID). Throws `.rejected` (409) when
    /// a document resolver throws or answers with a document of another database.
    func resolution(of conflict: Conflict, in databaseID: UUID) throws(StoreError) -> (ConflictResolution, warning: String?) {
        switch rule {
        case .defaultRule:
            return (Self.defaultResolution(of: conflict), nil)
        case .resolution(let resolve):
            return (resolve(conflict), nil)
        case .document(let resolve):
            let chosen: Document?
            do { chosen = try resolve(conflict) } catch {
                throw .rejected(status: 409, message: "conflict resolver failed: \(error)")
            }
            guard let doc = chosen else { return (.delete, nil) }
            if let source = doc.databaseID, source != databaseID {
                throw .rejected(status: 409, message: "conflict resolver returned document \(doc.id) from another database")
            }
            guard doc.id == conflict.documentID else {
                return (.merged(doc.properties),
                        "conflict resolver returned document \(doc.id) for \(conflict.documentID); saved as \(conflict.documentID)")
            }
            return (Self.resolution(of: doc, for: conflict), nil)
        }
    }

    private static func defaultResolution(of c: Conflict) -> ConflictResolution {
        guard c.local != nil, c.remote != nil else { return .delete }
        if c.localRevisionID.generation != c.remoteRevisionID.generation {
            return c.localRevisionID.generation > c.remoteRevisionID.generation ? .local : .remote
        }
        return c.localRevisionID > c.remoteRevisionID ? .local : .remote
    }

    /// The resolution a returned document with the conflict's ID stands for: one of the two
    /// sides unchanged, or a merged body.
    private static func resolution(of doc: Document, for conflict: Conflict) -> ConflictResolution {
        if let r = conflict.remote, doc.revisionID == r.revisionID, doc.properties == r.properties { return .remote }
        if let l = conflict.local, doc.revisionID == l.revisionID, doc.properties == l.properties { return .local }
        return .merged(doc.properties)
    }
}
