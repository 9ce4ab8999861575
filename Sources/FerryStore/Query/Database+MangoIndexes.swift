/// Mango indexes as CouchDB keeps them: views of design documents whose `language` is
/// `"query"` (so they replicate with the database). The REST `_index` endpoints and
/// `ferry index` both go through these.
extension Database {
    /// The Mango indexes: `_all_docs`, then those the design documents define, by design
    /// document and name.
    public func mangoIndexes() throws(StoreError) -> [MangoIndex] {
        var out: [MangoIndex] = [.allDocs]
        for ddoc in try allDocuments(from: "_design/", to: "_design0", limit: 10_000) {
            out += MangoIndex.indexes(inDesignDocument: ddoc.id, ddoc.properties)
        }
        return out
    }

    /// Saves `index` in its design document (made if absent). Returns false, writing nothing,
    /// when the design document already defines the same index. Throws `MangoError` when the
    /// design document exists with another `language`, `StoreError.conflict` when it changed
    /// meanwhile.
    @discardableResult
    public func createMangoIndex(_ index: MangoIndex) throws -> Bool {
        guard let ddocID = index.designDocument else { throw MangoError("invalid_index", "_all_docs cannot be created") }
        let existing = try document(ddocID)
        var props = existing?.properties ?? [:]
        if let existing, props["language"]?.stringValue != "query" {
            throw MangoError("invalid_ddoc_lang",
                             "Existing design doc has an invalid language: \(MangoSort.show(existing.properties["language"] ?? .null))")
        }
        if MangoIndex.indexes(inDesignDocument: ddocID, props).contains(index) { return false }
        var views = props["views"]?.objectValue ?? [:]
        views[index.name] = index.view
        props["views"] = .object(views)
        props["language"] = "query"
        var doc = existing ?? Document(id: ddocID)
        doc.properties = props
        _ = try save(doc, concurrencyControl: .failOnConflict)
        return true
    }

    /// Removes index `name` from design document `designDocument` (`_design/…`), deleting
    /// the design document when it was its last view. Returns false when there is no such
    /// index.
    @discardableResult
    public func deleteMangoIndex(designDocument: String, name: String) throws(StoreError) -> Bool {
        guard var doc = try document(designDocument), doc.properties["language"]?.stringValue == "query",
              var views = doc.properties["views"]?.objectValue, views[name] != nil else { return false }
        views[name] = nil
        if views.isEmpty {
            _ = try delete(doc, concurrencyControl: .failOnConflict)
        } else {
            doc.properties["views"] = .object(views)
            _ = try save(doc, concurrencyControl: .failOnConflict)
        }
        return true
    }
}
