/// Database routes beyond the core (`_bulk_get`, `_revs_diff`, `_purge`, `_compact`,
/// `_find`) and attachments: each answered in its own file.
extension RESTRouter {
    func extendedDatabaseRoute(_ c: Context, _ name: String) async throws(RESTError) -> RESTResponse? {
        nil
    }

    func attachment(_ c: Context, _ docID: String, _ name: String) async throws(RESTError) -> RESTResponse {
        throw .notFound("attachments are not served yet")
    }
}
