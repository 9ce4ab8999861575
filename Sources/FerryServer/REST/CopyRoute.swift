import FerryHTTP
import FerryStore
import FoundationEssentials

/// `COPY /{db}/{docid}` (Protocol/rest.md, "Documents"), as CouchDB has it: the source's
/// current revision (or `?rev=`) saved under the `Destination` header's ID — `newid` for a new
/// (or deleted) document, `newid?rev=R` to replace revision `R` of an existing one — with its
/// body and attachments (the same blobs, nothing copied). Answered like a `PUT`: 201 with
/// `ETag`, `Location` and `{"ok":true,"id","rev"}`; 409 when the destination exists and `R` is
/// not its current revision.
extension RESTRouter {
    func copyDocument(_ c: Context, _ sourceID: String) async throws(RESTError) -> RESTResponse {
        guard let header = c.request.header("Destination"), !header.isEmpty else {
            throw .badRequest("Destination header is mandatory for COPY.")
        }
        let (destination, destinationRev) = try Self.copyDestination(header)
        try requireWriteAccess(c, to: destination)
        do {
            let source: Document
            if let revText = c.request[query: "rev"] {
                guard let rev = try Self.parseRevision(revText), let d = try c.db.revision(rev, of: sourceID), !d.isDeleted else {
                    throw RESTError.notFound("missing")
                }
                source = d
            } else {
                guard let d = try c.db.document(sourceID) else { throw RESTError.notFound("missing") }
                source = d
            }
            let parent = try destinationRev.map { (t) throws(StoreError) in try RevisionID(t) }
            let copy = Document(id: destination, basedOn: parent, properties: Self.withoutRevpos(source.properties))
            let saved = try await c.db.write { (d) throws(StoreError) in try d.save(copy, concurrencyControl: .failOnConflict) }
            let rev = saved.revisionID?.description ?? ""
            return .json(201, .object(["ok": true, "id": .string(destination), "rev": .string(rev)]),
                         headers: [("ETag", "\"\(rev)\""), ("Location", Self.documentLocation(db: c.name, id: destination))])
        } catch {
            throw RESTError.from(error)
        }
    }

    /// The destination's ID (percent-decoded, as CouchDB reads it) and the revision it names
    /// with `?rev=`, if any.
    static func copyDestination(_ header: String) throws(RESTError) -> (id: String, rev: String?) {
        let trimmed = header.trimmingASCIIWhitespace()
        let parts = trimmed.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let rawID = parts.first, let id = PercentEncoding.decode(rawID, plusIsSpace: false), !id.isEmpty else {
            throw .illegalDocumentID("")
        }
        var rev: String?
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if kv.count == 2, kv[0] == "rev" { rev = PercentEncoding.decode(kv[1], plusIsSpace: true) }
            }
        }
        return (id, rev)
    }

    /// The body with every attachment's `revpos` removed: in the copy, the save works it out
    /// again (the revision that added the attachment to *this* document).
    static func withoutRevpos(_ properties: [String: JSONValue]) -> [String: JSONValue] {
        guard case .object(var members)? = properties["_attachments"] else { return properties }
        for (name, entry) in members {
            guard case .object(var meta) = entry else { continue }
            meta["revpos"] = nil
            members[name] = .object(meta)
        }
        var out = properties
        out["_attachments"] = .object(members)
        return out
    }
}
