import Foundation

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
    /// The Mango indexes: `_all_docs`, then those the design documents define
    /// (`language: "query"`), by design document and name.
    public func mangoIndexes() throws(StoreError) -> [MangoIndex] {
        var out: [MangoIndex] = [.allDocs]
        for ddoc in try allDocuments(from: "_design/", to: "_design0", limit: 10_000) {
            out += MangoIndex.indexes(inDesignDocument: ddoc.id, ddoc.properties)
        }
        return out
    }

    /// Which index would serve `query`, and the warnings that come with it (`_explain`).
    public func plan(_ query: MangoQuery) throws -> (index: MangoIndex, warnings: [String]) {
        let p = try MangoPlanner.plan(query, indexes: try mangoIndexes())
        return (p.index, p.warnings)
    }

    /// The documents matching a Mango query, as CouchDB 3.5 answers `_find`: in the order of
    /// the index that serves it (its columns in CouchDB's collation, then `_id`; `_all_docs`:
    /// by `_id`), reversed for a descending sort; only documents the index holds (all its
    /// columns present, and its partial filter matched); design documents never.
    /// Throws `MangoError` for a query CouchDB refuses, `StoreError` for the store's faults.
    public func find(_ query: MangoQuery) throws -> MangoResult {
        let plan = try MangoPlanner.plan(query, indexes: try mangoIndexes())
        let index = plan.index
        let partial = try index.partialFilter.map { (f) throws(MangoError) in try MangoSelector(json: f) }
        let columns = try index.columns.map { (c) throws(MangoError) in try MangoFieldPath(c) }
        let isAllDocs = index.designDocument == nil

        var rows: [(key: [JSONValue], doc: Document)] = []
        var keysExamined = 0, docsExamined = 0
        var after: String?
        while true {
            let page = try allDocuments(after: after, limit: 1000)
            for doc in page {
                after = doc.id
                if Document.isDesignID(doc.id) { continue }
                let json = Self.mangoJSON(doc)
                var key: [JSONValue] = []
                if !isAllDocs {
                    // The index holds the document only with every column present.
                    var complete = true
                    for c in columns {
                        guard case .found(let v) = c.lookup(in: json) else { complete = false; break }
                        key.append(v)
                    }
                    guard complete, partial?.matches(json) ?? true else { continue }
                }
                keysExamined += 1
                docsExamined += 1
                guard query.selector.matches(json) else { continue }
                rows.append((key, doc))
            }
            if page.count < 1000 { break }
        }
        if !isAllDocs {
            rows.sort { a, b in Self.indexOrder(a.key, a.doc.id, b.key, b.doc.id) < 0 }
        }
        if query.sort.descending { rows.reverse() }
        if let bookmark = query.bookmark {
            guard let (key, id) = MangoBookmark.decode(bookmark) else {
                throw MangoError("invalid_bookmark", "Invalid bookmark value: \"\(bookmark)\"")
            }
            let direction = query.sort.descending ? -1 : 1
            rows.removeAll { Self.indexOrder($0.key, $0.doc.id, key, id) * direction <= 0 }
        }
        let page = rows.dropFirst(query.skip).prefix(query.limit)
        let bookmark = page.last.map { MangoBookmark.encode($0.key, $0.doc.id) } ?? query.bookmark ?? "nil"
        return MangoResult(documents: page.map(\.doc), bookmark: bookmark, index: index, warnings: plan.warnings,
                           keysExamined: keysExamined, documentsExamined: docsExamined)
    }

    /// A document as a selector sees it: its body with `_id`, `_rev` (and `_deleted`).
    static func mangoJSON(_ doc: Document) -> JSONValue {
        var o = doc.properties
        o["_id"] = .string(doc.id)
        if let rev = doc.revisionID { o["_rev"] = .string(rev.description) }
        if doc.isDeleted { o["_deleted"] = true }
        return .object(o)
    }

    /// A view's order of rows: keys in CouchDB's collation, then document IDs byte by byte.
    static func indexOrder(_ ka: [JSONValue], _ ida: String, _ kb: [JSONValue], _ idb: String) -> Int {
        let c = CouchCollation.compare(.array(ka), .array(kb))
        if c != 0 { return c }
        return ida.utf8.lexicographicallyPrecedes(idb.utf8) ? -1 : (ida == idb ? 0 : 1)
    }
}
