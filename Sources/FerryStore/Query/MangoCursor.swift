/// One `_find` page read from an index's rows in order, as CouchDB's `mango_cursor_view`
/// reads a view: after a bookmark the first row is passed over unread (the view's
/// `skip = 1`: the bookmark's own row); then each document that matches the selector is
/// first counted against `skip`, then kept until `limit` are; the bookmark it answers is the
/// last matching row read while the page was not full (skipped ones too).
struct MangoCursor {
    private let selector: MangoSelector
    private var skip: Int
    private var limit: Int
    private var passOverFirstRow: Bool
    private let givenBookmark: String?
    private(set) var documents: [Document] = []
    private(set) var lastMatched: (document: Document, json: JSONValue)?
    private(set) var keysExamined = 0
    private(set) var documentsExamined = 0

    init(_ query: MangoQuery) {
        selector = query.selector
        skip = query.skip
        limit = query.limit
        passOverFirstRow = query.bookmark != nil
        givenBookmark = query.bookmark
    }

    /// Whether the page still wants rows.
    var wantsMore: Bool { limit > 0 }

    /// Counts an index row; false for the one a bookmark passes over.
    mutating func examineRow() -> Bool {
        if passOverFirstRow {
            passOverFirstRow = false
            return false
        }
        keysExamined += 1
        return true
    }

    /// The row's document.
    mutating func offer(_ row: (document: Document, json: JSONValue)) {
        documentsExamined += 1
        guard selector.matches(row.json) else { return }
        lastMatched = row
        if skip > 0 {
            skip -= 1
            return
        }
        documents.append(row.document)
        limit -= 1
    }

    /// The answer, with the page's bookmark (the query's own when no row matched).
    func result(_ plan: MangoPlanner.Plan, bookmark: String?) -> MangoResult {
        MangoResult(documents: documents, bookmark: bookmark ?? givenBookmark ?? "nil", index: plan.index, warnings: plan.warnings,
                    keysExamined: keysExamined, documentsExamined: documentsExamined)
    }
}
