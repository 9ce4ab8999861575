/// Revisions peers acknowledged, recorded in `remote_revs` beside the document rows (schema 3,
/// docs/store.md §5). A pusher learns that a remote has a revision once per pushed document;
/// writing that into the document's tree meant decoding, re-encoding and rewriting the whole
/// row (a third of a pusher's CPU). A row here costs one small B-tree insert instead, and the
/// tree takes it over the next time the document is written: every write loads the tree through
/// `apply`, so pruning and body retention see the pin, and storing the tree deletes the rows.
/// Readers apply the rows too, so `RevisionTree.remoteRevisions` means the same either way.
enum AcknowledgedRevisions {
    static let selectSQL = "SELECT remote_key, rev_id FROM remote_revs WHERE doc_id = ?"
    /// Only for a document that exists: an acknowledgement arriving after a purge leaves no row.
    static let recordSQL = """
        INSERT OR REPLACE INTO remote_revs (doc_id, remote_key, rev_id)
        SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM docs WHERE doc_id = ?1)
        """
    /// `recordSQL` without the existence check (which cost as much as the insert): for when
    /// no document was purged since the acknowledged ones were read (`meta.purges` unchanged).
    static let recordUncheckedSQL = "INSERT OR REPLACE INTO remote_revs (doc_id, remote_key, rev_id) VALUES (?1, ?2, ?3)"
    /// Rows per statement of `recordUncheckedManySQL`.
    static let rowsPerStatement = 32
    /// `recordUncheckedSQL` for `rowsPerStatement` rows at once (parameters 3k+1…3k+3 are row
    /// k's): a pusher records a whole batch, and a statement's own cost (binding, stepping,
    /// resetting the VM) was most of a row's. Rows go in in order, so a later row for the same
    /// key replaces an earlier one as it would one statement later.
    static let recordUncheckedManySQL = "INSERT OR REPLACE INTO remote_revs (doc_id, remote_key, rev_id) VALUES "
        + Array(repeating: "(?, ?, ?)", count: rowsPerStatement).joined(separator: ", ")
    /// `meta.purges`: how many document rows the file has seen deleted (absent: none; kept by
    /// the `docs_purged` trigger, schema 4).
    static let purgesSQL = "SELECT value FROM meta WHERE key = 'purges'"
    static let deleteSQL = "DELETE FROM remote_revs WHERE doc_id = ?"

    /// Applies `id`'s rows (read with a statement prepared from `selectSQL`) to `tree`.
    /// Revisions no longer in the tree (pruned, purged and re-created) are ignored. Returns
    /// whether the document had any rows.
    static func apply(_ s: Statement, documentID id: String, to tree: inout RevisionTree) throws(StoreError) -> Bool {
        defer { s.reset() }
        s.bind(1, id)
        var any = false
        while try s.step() {
            any = true
            apply(remote: s.int(0), revision: s.string(1), to: &tree)
        }
        return any
    }

    /// Applies one row: `remote` has `revision`, if the tree still holds it.
    static func apply(remote: Int, revision: String, to tree: inout RevisionTree) {
        guard let rev = try? RevisionID(revision), tree.nodes[rev] != nil else { return }
        tree.setRemoteRevision(rev, remote: remote)
    }
}
