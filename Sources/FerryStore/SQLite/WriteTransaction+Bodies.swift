/// Bodies of local saves: checking and canonicalising them, their types, and validation.
extension WriteTransaction {
    // MARK: - Bodies

    /// Checks and canonicalises a body for a local save: `_deleted: true` makes it a deletion
    /// (and is not part of the body); `_attachments` is allowed; other `_` keys are refused.
    func prepareBody(_ props: [String: JSONValue]) throws(StoreError) -> (body: [String: JSONValue], canonical: [UInt8], deleted: Bool) {
        var body = props
        var deleted = false
        for key in props.keys where key.utf8.first == UInt8(ascii: "_") {
            switch key {
            case "_attachments": continue
            case "_deleted":
                guard case .bool(let b) = props[key] else { throw .reservedProperty(key) }
                deleted = b
                body[key] = nil
            default: throw .reservedProperty(key)
            }
        }
        let canonical = CanonicalJSON.encode(body)
        guard canonical.count <= options.maxDocumentSize else { throw .tooLarge(limit: options.maxDocumentSize) }
        return (body, canonical, deleted)
    }

    static func changedKeys(from old: [String: JSONValue]?, to new: [String: JSONValue]) -> [String] {
        let old = old ?? [:]
        var keys = Set(old.keys)
        keys.formUnion(new.keys)
        return keys.filter { old[$0] != new[$0] }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    func validate(_ id: String, rev: RevisionID, body: [String: JSONValue], deleted: Bool,
                  source: ProposedRevision.Source, current: Document?) throws(StoreError) {
        guard !context.validators.isEmpty else { return }
        let proposed = ProposedRevision(documentID: id, revisionID: rev, properties: body, isDeletion: deleted, source: source)
        let ctx = ValidationContext(currentRevision: current, changedKeys: Self.changedKeys(from: current?.properties, to: body))
        for v in context.validators {
            if case .reject(let message, let status) = v.validate(proposed, ctx) {
                throw .rejected(status: status, message: message)
            }
        }
    }
}
