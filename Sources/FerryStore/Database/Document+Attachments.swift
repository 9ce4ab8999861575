/// Editing a document's `_attachments` without spelling the JSON.
extension Document {
    /// Adds or replaces the attachment `name` with a stored blob. `revpos` is left for the save
    /// to fill in (the new revision's generation), unless the entry already had this same blob.
    public mutating func setAttachment(_ name: String, blob: BlobMetadata, contentType: String? = nil) {
        var members = properties["_attachments"]?.objectValue ?? [:]
        var meta: [String: JSONValue] = ["digest": .string(blob.digest.description), "length": .int(blob.length)]
        if let contentType { meta["content_type"] = .string(contentType) }
        if let old = members[name]?.objectValue, old["digest"]?.stringValue == blob.digest.description,
           let revpos = old["revpos"] {
            meta["revpos"] = revpos
        }
        members[name] = .object(meta)
        properties["_attachments"] = .object(members)
    }

    /// Removes the attachment `name` (and `_attachments` when it was the last one). The blob
    /// stays until `Database.compact()` finds nothing referencing it.
    public mutating func removeAttachment(_ name: String) {
        guard var members = properties["_attachments"]?.objectValue else { return }
        members[name] = nil
        properties["_attachments"] = members.isEmpty ? nil : .object(members)
    }
}
