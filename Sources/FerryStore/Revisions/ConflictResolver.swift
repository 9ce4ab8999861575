/// Decides a conflict. Must be a pure function of the conflict, and should be symmetric in
/// content (`f(a, b)` and `f(b, a)` give the same body), or peers can diverge (Protocol/revisions.md,
/// "Convergence rules").
public struct ConflictResolver: Sendable {
    let isDefault: Bool
    let body: @Sendable (Conflict) -> ConflictResolution

    /// A custom resolver.
    public static func custom(_ resolve: @escaping @Sendable (Conflict) -> ConflictResolution) -> ConflictResolver {
        ConflictResolver(isDefault: false, body: resolve)
    }

    /// The default rule (Protocol/revisions.md, "Default resolver"; Couchbase Lite 3.x): a deletion wins; otherwise the
    /// higher generation ("most revisions") wins; a tie goes to the higher revision ID. Both
    /// peers compare the same two IDs, so they pick the same content.
    public static let `default` = ConflictResolver(isDefault: true) { c in
        guard c.local != nil, c.remote != nil else { return .delete }
        if c.localRevisionID.generation != c.remoteRevisionID.generation {
            return c.localRevisionID.generation > c.remoteRevisionID.generation ? .local : .remote
        }
        return c.localRevisionID > c.remoteRevisionID ? .local : .remote
    }

    /// Applies the resolver.
    public func resolve(_ conflict: Conflict) -> ConflictResolution { body(conflict) }
}
