/// Queries (docs/store.md §8): all documents by ID range, documents of a type, documents matching a
/// predicate, and optional indexes on fields. Results are current revisions in document-ID
/// order; tombstones are excluded unless `includeDeleted`. Page with `after:` (the last ID of
/// the previous page) and `limit`.
extension Database {
    /// All documents with IDs in `[from, to]` (either bound optional), after `after`.
    public func allDocuments(from: String? = nil, to: String? = nil, after: String? = nil, limit: Int = 1000,
                             includeDeleted: Bool = false) throws(StoreError) -> [Document] {
        var conditions: [String] = []
        var bindings: [JSONValue] = []
        if let from { conditions.append("doc_id >= ?"); bindings.append(.string(from)) }
        if let to { conditions.append("doc_id <= ?"); bindings.append(.string(to)) }
        return try query(where: conditions, bindings: bindings, after: after, limit: limit, includeDeleted: includeDeleted)
    }

    /// Which of `ids` have a current revision that matches `predicate` (a `_changes` feed
    /// filtered by a selector asks this of each page).
    public func documentIDs(matching predicate: Predicate, among ids: [String]) throws(StoreError) -> Set<String> {
        guard !ids.isEmpty else { return [] }
        var compiler = PredicateCompiler(typeKey: options.typeKey)
        let sql = try compiler.compile(predicate)
        let placeholders = Array(repeating: "?", count: ids.count).joined(separator: ",")
        return try readers.withReader { (c) throws(StoreError) -> Set<String> in
            let s = try c.prepare("SELECT doc_id FROM docs WHERE (\(sql)) AND doc_id IN (\(placeholders))")
            defer { s.reset() }
            for (i, v) in compiler.bindings.enumerated() { s.bind(Int32(i + 1), v) }
            for (i, id) in ids.enumerated() { s.bind(Int32(compiler.bindings.count + i + 1), id) }
            var out = Set<String>()
            while try s.step() { out.insert(s.string(0)) }
            return out
        }
    }

    /// How many live documents sort before `id` (or after it, with `after: true`) in ID order:
    /// the `offset` of an `_all_docs` range that starts there.
    public func documentCount(outside id: String, after: Bool = false) throws(StoreError) -> Int {
        try readers.withReader { (c) throws(StoreError) -> Int in
            let s = try c.prepare("SELECT count(*) FROM docs WHERE deleted = 0 AND doc_id \(after ? ">" : "<") ?")
            defer { s.reset() }
            s.bind(1, id)
            return try s.step() ? s.int(0) : 0
        }
    }

    /// Documents whose type property (`options.typeKey`, default `type`) is `type`; uses the
    /// `doc_type` column's index, so it never scans.
    public func documents(ofType type: String, after: String? = nil, limit: Int = 1000,
                          includeDeleted: Bool = false) throws(StoreError) -> [Document] {
        try documents(matching: .equal(options.typeKey, .string(type)), after: after, limit: limit, includeDeleted: includeDeleted)
    }

    /// Documents matching `predicate`.
    public func documents(matching predicate: Predicate, after: String? = nil, limit: Int = 1000,
                          includeDeleted: Bool = false) throws(StoreError) -> [Document] {
        var compiler = PredicateCompiler(typeKey: options.typeKey)
        let sql = try compiler.compile(predicate)
        return try query(where: [sql], bindings: compiler.bindings, after: after, limit: limit, includeDeleted: includeDeleted)
    }

    /// Creates (if missing) an index on a field so equality and range predicates on it, and
    /// `documents(ofType:)` for the type key, do not scan every document.
    public func createIndex(on field: String) throws(StoreError) {
        let expr = try PredicateCompiler.extract(field)
        let name = "docs_field_" + Hex.encode(Array(field.utf8))
        try writer.withConnection { (c) throws(StoreError) in
            try c.execute("CREATE INDEX IF NOT EXISTS \(name) ON docs(\(expr))")
        }
    }

    /// The query plan SQLite picks for a predicate (to check that an index is used).
    public func explain(_ predicate: Predicate) throws(StoreError) -> [String] {
        var compiler = PredicateCompiler(typeKey: options.typeKey)
        let sql = try compiler.compile(predicate)
        return try readers.withReader { (c) throws(StoreError) -> [String] in
            // EXPLAIN starts no read transaction, so it would plan against a stale schema:
            // read once first so the connection reloads it.
            _ = try c.scalarInt("SELECT count(*) FROM sqlite_master")
            let s = try c.prepareUncached("EXPLAIN QUERY PLAN SELECT doc_id FROM docs WHERE deleted = 0 AND \(sql)")
            defer { s.finalize() }
            for (i, v) in compiler.bindings.enumerated() { s.bind(Int32(i + 1), v) }
            var out: [String] = []
            while try s.step() { out.append(s.string(3)) }
            return out
        }
    }

    func query(where conditions: [String], bindings: [JSONValue], after: String?, limit: Int,
               includeDeleted: Bool) throws(StoreError) -> [Document] {
        guard limit > 0 else { throw .invalidArgument("limit must be positive") }
        var all = conditions
        var binds = bindings
        if !includeDeleted { all.append("deleted = 0") }
        if let after { all.append("doc_id > ?"); binds.append(.string(after)) }
        let whereSQL = all.isEmpty ? "" : "WHERE " + all.joined(separator: " AND ")
        let sql = "SELECT doc_id, rev_id, deleted, sequence, body FROM docs \(whereSQL) ORDER BY doc_id LIMIT ?"
        return try readers.withReader { (c) throws(StoreError) -> [Document] in
            let s = try c.prepare(sql)
            defer { s.reset() }
            for (i, v) in binds.enumerated() { s.bind(Int32(i + 1), v) }
            s.bind(Int32(binds.count + 1), limit)
            var out: [Document] = []
            while try s.step() {
                let id = s.string(0)
                let rev = try s.revisionID(1, of: id)
                let props = try WriteTransaction.properties(of: s.bytes(4), documentID: id)
                out.append(Document(id: id, revisionID: rev, properties: props, isDeleted: s.int(2) != 0, sequence: s.int64(3)).from(uuid))
            }
            return out
        }
    }
}
