import FoundationEssentials

/// What `Database.find(_:)` answers: the documents in order, where the page ended, the index
/// that served the query, and CouchDB's warnings and statistics.
public struct MangoResult: Sendable {
    /// The matching documents, sorted, after `skip`, at most `limit`.
    public var documents: [Document]
    /// Give this as the next query's `bookmark` for the page after this one.
    public var bookmark: String
    /// The index that served the query.
    public var index: MangoIndex
    /// CouchDB's warnings (no index was usable, `use_index` was not followed).
    public var warnings: [String]
    /// Index entries read.
    public var keysExamined: Int
    /// Documents read and matched against the selector.
    public var documentsExamined: Int
}

extension Database {
    /// Which index would serve `query`, and the warnings that come with it (`_explain`).
    public func plan(_ query: MangoQuery) throws -> (index: MangoIndex, warnings: [String]) {
        let p = try MangoPlanner.plan(query, indexes: try mangoIndexes())
        return (p.index, p.warnings)
    }

    /// The documents matching a Mango query, as CouchDB 3.5 answers `_find`: in the order of
    /// the index that serves it (its columns in CouchDB's collation, then `_id`; `_all_docs`:
    /// by `_id`), reversed for a descending sort; only documents the index holds (all its
    /// columns present, and its partial filter matched); design documents never.
    ///
    /// A `json` index is read from its SQLite entries (`mango_entries`), built the first time
    /// a query uses it and kept by every write after (a replicator's batches leave theirs to
    /// the next query, which brings the index up to date first); only the rows inside the
    /// selector's key range are read, and reading stops once the page is full.
    /// Throws `MangoError` for a query CouchDB refuses, `StoreError` for the store's faults.
    public func find(_ query: MangoQuery) throws -> MangoResult {
        // A design document changed between planning and building: plan again.
        for _ in 0..<3 {
            let plan = try MangoPlanner.plan(query, indexes: try mangoIndexes())
            guard plan.index.designDocument != nil else { return try scanAllDocs(query, plan) }
            if let key = try registeredIndexKey(plan.index) { return try scanIndex(query, plan, key) }
        }
        throw MangoError(409, "index_changed", "The index's design document kept changing during the query; try again.")
    }

    /// The registered index's key, registering and building it first if no query used it yet;
    /// nil if its design document no longer defines it.
    /// A stale index (a replicated batch deferred its upkeep) is brought up to date first.
    func registeredIndexKey(_ index: MangoIndex) throws(StoreError) -> Int64? {
        let known = try readers.withReader { (c) throws(StoreError) -> (key: Int64, stale: Bool)? in
            let s = try c.prepare("SELECT index_key, stale_from IS NOT NULL FROM mango_indexes WHERE ddoc = ? AND name = ? AND definition = ?")
            defer { s.reset() }
            s.bind(1, index.designDocument ?? "")
            s.bind(2, index.name)
            s.bind(3, index.storedDefinition)
            return try s.step() ? (s.int64(0), s.int64(1) != 0) : nil
        }
        if let known {
            if known.stale { try writer.transaction(context) { (txn) throws(StoreError) in try txn.catchUpMangoIndexes() } }
            return known.key
        }
        return try writer.transaction(context) { (txn) throws(StoreError) -> Int64? in
            try txn.catchUpMangoIndexes()
            return try txn.registerMangoIndex(index)
        }
    }

    /// `find` on a `json` index: its entries in the key range, in key order (reversed for a
    /// descending sort), each document matched against the whole selector.
    private func scanIndex(_ query: MangoQuery, _ plan: MangoPlanner.Plan, _ indexKey: Int64) throws -> MangoResult {
        let columns = try plan.index.columns.map { (c) throws(MangoError) in try MangoFieldPath(c) }
        var range = MangoKeyRange(columns: plan.index.columns, selector: query.selector)
        if let (key, id) = try Self.decodeBookmark(query.bookmark) {
            let row = CollationKey.encode(key) + Array(id.utf8)
            if query.sort.descending { range.endAfter(row) } else { range.raiseLower(to: row) }
        }
        let sql = """
            SELECT d.doc_id, d.rev_id, d.sequence, d.body FROM mango_entries e JOIN docs d ON d.doc_key = e.doc_key
            WHERE e.index_key = ? AND e.key >= ? AND e.key < ? ORDER BY e.key\(query.sort.descending ? " DESC" : "")
            """
        var cursor = MangoCursor(query)
        try readers.withReader { (c) throws(StoreError) in
            let s = try c.prepare(sql)
            defer { s.reset() }
            s.bind(1, indexKey)
            s.bindBlob(2, range.lower)
            s.bindBlob(3, range.upper)
            while cursor.wantsMore, try s.step() {
                guard cursor.examineRow() else { continue }
                cursor.offer(try readRow(s))
            }
        }
        let bookmark = cursor.lastMatched.map { last in
            MangoBookmark.encode(columns.map { c in
                if case .found(let v) = c.lookup(in: last.json) { return v }
                return .null
            }, last.document.id)
        }
        return cursor.result(plan, bookmark: bookmark)
    }

    /// `find` on `_all_docs`: live documents by ID (within the selector's `_id` bounds).
    private func scanAllDocs(_ query: MangoQuery, _ plan: MangoPlanner.Plan) throws -> MangoResult {
        var conditions = MangoKeyRange.idConditions(query.selector)
        if let (_, id) = try Self.decodeBookmark(query.bookmark) {
            conditions.append((query.sort.descending ? "doc_id <= ?" : "doc_id >= ?", id))
        }
        let sql = "SELECT doc_id, rev_id, sequence, body FROM docs WHERE deleted = 0"
            + conditions.map { " AND " + $0.sql }.joined() + " ORDER BY doc_id" + (query.sort.descending ? " DESC" : "")
        var cursor = MangoCursor(query)
        try readers.withReader { (c) throws(StoreError) in
            let s = try c.prepare(sql)
            defer { s.reset() }
            for (i, cond) in conditions.enumerated() { s.bind(Int32(i + 1), cond.value) }
            while cursor.wantsMore, try s.step() {
                if Document.isDesignID(s.string(0)) { continue }
                guard cursor.examineRow() else { continue }
                cursor.offer(try readRow(s))
            }
        }
        return cursor.result(plan, bookmark: cursor.lastMatched.map { MangoBookmark.encode([], $0.document.id) })
    }

    /// The document in a row of `doc_id, rev_id, sequence, body`, and its selector view.
    private func readRow(_ s: Statement) throws(StoreError) -> (document: Document, json: JSONValue) {
        let id = s.string(0)
        let rev = try s.revisionID(1, of: id)
        let props = try WriteTransaction.properties(of: s.bytes(3), documentID: id)
        let doc = Document(id: id, revisionID: rev, properties: props, isDeleted: false, sequence: s.int64(2)).from(uuid)
        return (doc, Self.mangoJSON(id: id, revision: rev, properties: props, deleted: false))
    }

    private static func decodeBookmark(_ text: String?) throws(MangoError) -> (key: [JSONValue], id: String)? {
        guard let text else { return nil }
        guard let decoded = MangoBookmark.decode(text) else {
            throw MangoError("invalid_bookmark", "Invalid bookmark value: \"\(text)\"")
        }
        return decoded
    }

    /// A document as a selector sees it: its body with `_id`, `_rev` (and `_deleted`).
    static func mangoJSON(_ doc: Document) -> JSONValue { .object(doc.jsonObject) }

    static func mangoJSON(id: String, revision: RevisionID?, properties: [String: JSONValue], deleted: Bool) -> JSONValue {
        var o = properties
        o["_id"] = .string(id)
        if let revision { o["_rev"] = .string(revision.description) }
        if deleted { o["_deleted"] = true }
        return .object(o)
    }
}
