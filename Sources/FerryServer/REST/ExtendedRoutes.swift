/// Database routes beyond the core, each answered in its own file: replication endpoints
/// (`_bulk_get`, `_revs_diff`, `_revs_limit`, `_ensure_full_commit`), maintenance (`_purge`,
/// `_compact`) and queries (`_find`, `_explain`, `_index`). Attachments are in `AttachmentRoutes.swift`.
extension RESTRouter {
    /// The answer for `/{db}/{name}` when `name` is one of these routes; nil for any other name
    /// (the router answers 404).
    func extendedDatabaseRoute(_ c: Context, _ name: String) async throws(RESTError) -> RESTResponse? {
        switch name {
        case "_bulk_get": return try bulkGet(c)
        case "_revs_diff": return try revsDiff(c)
        case "_revs_limit": return try revsLimit(c)
        case "_ensure_full_commit": return try ensureFullCommit(c)
        case "_purge": return try purge(c)
        case "_compact": return try compact(c)
        case "_purged_infos_limit": return try purgedInfosLimit(c)
        case "_find": return try find(c)
        case "_index": return try findIndex(c)
        case "_explain": return try explain(c)
        default: return nil
        }
    }
}
