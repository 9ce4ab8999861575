/// `_attachments` on the way in: checked on every save and insert before anything is written,
/// with revpos filled in on local saves.
extension WriteTransaction {
    typealias PreparedBody = (body: [String: JSONValue], canonical: [UInt8], deleted: Bool)

    /// A local save (or merged resolution) of a revision of `generation`: checks the entries,
    /// and gives every entry without `revpos` the parent's revpos if the parent had the same
    /// blob under that name, else `generation` (CouchDB: the revision that added or changed
    /// it). Re-canonicalises the body if it changed.
    func prepareAttachments(_ prepared: inout PreparedBody, generation: Int,
                            previous: [String: JSONValue]?) throws(StoreError) {
        guard let entries = try Attachment.entries(in: prepared.body) else { return }
        try checkStoredLengths(entries)
        guard case .object(var members) = prepared.body["_attachments"] else { return }
        // The parent's entries were checked when it was stored; if they do not parse now,
        // treat every attachment as new rather than refuse the save.
        let old = previous.flatMap { p in try? Attachment.entries(in: p) } ?? [:]
        var changed = false
        for (name, entry) in entries where entry.revpos == nil {
            guard case .object(var meta) = members[name] else { continue }
            let inherited = old[name].flatMap { $0.digest == entry.digest ? $0.revpos : nil }
            meta["revpos"] = .int(Int64(inherited ?? generation))
            members[name] = .object(meta)
            changed = true
        }
        guard changed else { return }
        prepared.body["_attachments"] = .object(members)
        prepared.canonical = CanonicalJSON.encode(prepared.body)
        guard prepared.canonical.count <= options.maxDocumentSize else { throw .tooLarge(limit: options.maxDocumentSize) }
    }

    /// A replicated body: entries are checked, kept as received. Blobs not here yet are fine
    /// (stubs a download policy skipped); blobs that are here must have the stated length.
    func checkReplicatedAttachments(_ props: [String: JSONValue]) throws(StoreError) {
        guard let entries = try Attachment.entries(in: props) else { return }
        try checkStoredLengths(entries)
    }

    /// An entry whose blob is stored must state the blob's real length.
    func checkStoredLengths(_ entries: [String: Attachment.Entry]) throws(StoreError) {
        for (name, e) in entries.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            if let stored = context.blobs.length(of: e.digest), stored != e.length {
                throw .invalidAttachment(name: name, reason: "length \(e.length) but the stored blob has \(stored) bytes")
            }
        }
    }
}
