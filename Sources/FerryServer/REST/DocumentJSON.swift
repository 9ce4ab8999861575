import FerryStore

/// Documents as the REST API writes and reads them (Protocol/rest.md, "Documents"): the
/// stored body with `_id`, `_rev` and, when asked, `_deleted`, `_revisions`, `_revs_info`,
/// `_conflicts`; and request bodies split into what the store keeps and what CouchDB puts in
/// special members.
enum DocumentJSON {
    /// `{"_id":…,"_rev":…,` spliced in front of a stored body, without parsing it.
    static func splice(id: String, rev: String, deleted: Bool, body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + id.utf8.count + rev.utf8.count + 32)
        out += Array(#"{"_id":"#.utf8)
        out += CanonicalJSON.encode(.string(id))
        out += Array(#","_rev":"#.utf8)
        out += CanonicalJSON.encode(.string(rev))
        if deleted { out += Array(#","_deleted":true"#.utf8) }
        // The stored body is a canonical object: `{}` or `{"k":…}`.
        if body.count > 2 {
            out.append(UInt8(ascii: ","))
            out += body[1...]
        } else {
            out.append(UInt8(ascii: "}"))
        }
        return out
    }

    /// The members a read may add to a revision's body, as CouchDB's options name them.
    struct Extras: Equatable {
        /// `_revisions` (`revs=true`).
        var revs = false
        /// `_revs_info` (`revs_info=true`, `meta=true`).
        var revsInfo = false
        /// `_conflicts`: the other live leaves (`conflicts=true`, `meta=true`).
        var conflicts = false
        /// `_deleted_conflicts`: the deleted leaves other than the current revision
        /// (`deleted_conflicts=true`, `meta=true`).
        var deletedConflicts = false
        /// `_local_seq`: the sequence of the document's latest change (`local_seq=true`).
        var localSeq = false
    }

    /// The full JSON object of a revision with the extras a GET asked for; attachments as
    /// CouchDB's stubs (`AttachmentRendering`).
    static func object(_ doc: Document, tree: RevisionTree?, revs: Bool, revsInfo: Bool, conflicts: Bool) -> JSONValue {
        object(doc, tree: tree, Extras(revs: revs, revsInfo: revsInfo, conflicts: conflicts))
    }

    /// The full JSON object of a revision with `extras`; attachments as CouchDB's stubs.
    static func object(_ doc: Document, tree: RevisionTree?, _ extras: Extras) -> JSONValue {
        var o = doc.properties
        o["_id"] = .string(doc.id)
        if let rev = doc.revisionID { o["_rev"] = .string(rev.description) }
        if doc.isDeleted { o["_deleted"] = true }
        if extras.localSeq { o["_local_seq"] = .int(doc.sequence) }
        if let tree, let rev = doc.revisionID {
            if extras.revs { o["_revisions"] = revisions(tree.history(of: rev)) }
            if extras.revsInfo {
                // Only leaf bodies are kept: an inner revision is `missing` where CouchDB
                // (uncompacted) says `available` (Protocol/rest.md, "Deliberate differences").
                o["_revs_info"] = .array(tree.history(of: rev).map { r in
                    let node = tree.nodes[r]
                    let status = node?.isDeleted == true ? "deleted" : (node?.body != nil ? "available" : "missing")
                    return .object(["rev": .string(r.description), "status": .string(status)])
                })
            }
            if extras.conflicts {
                let others = tree.conflicts.filter { $0 != rev }
                if !others.isEmpty { o["_conflicts"] = .array(others.map { .string($0.description) }) }
            }
            if extras.deletedConflicts {
                // CouchDB lists every deleted leaf but the current revision, newest first.
                let deleted = tree.leaves.filter { $0.isDeleted && $0.revisionID != rev }.map(\.revisionID)
                if !deleted.isEmpty { o["_deleted_conflicts"] = .array(deleted.map { .string($0.description) }) }
            }
        }
        return .object(AttachmentRendering.stubbed(o))
    }

    /// CouchDB's `_revisions`: `{"start": generation, "ids": [digests, newest first]}`.
    static func revisions(_ history: [RevisionID]) -> JSONValue {
        .object(["start": .int(Int64(history.first?.generation ?? 0)), "ids": .array(history.map { .string($0.digest) })])
    }

    /// The revision IDs a `_revisions` object names, newest first; nil when malformed.
    static func history(from revisions: JSONValue?) -> [String]? {
        // Generations count down to 1: a start below the number of IDs (or negative, which
        // would overflow the countdown) is not a history.
        guard let o = revisions?.objectValue, let start = o["start"]?.intValue, let ids = o["ids"]?.arrayValue,
              start >= Int64(ids.count) else { return nil }
        var out: [String] = []
        for (i, id) in ids.enumerated() {
            guard let digest = id.stringValue else { return nil }
            out.append("\(start - Int64(i))-\(digest)")
        }
        return out.isEmpty ? nil : out
    }

    /// CouchDB's checks of a body's `_revisions` (couch_doc, whatever `new_edits` says): an
    /// object with an integer `start` and an array of string `ids`, else 400 `doc_validation`.
    static func checkRevisionsShape(_ revisions: JSONValue?) throws(RESTError) {
        guard let revisions else { return }
        func invalid(_ reason: String) -> RESTError { RESTError(400, "doc_validation", reason) }
        guard let o = revisions.objectValue else { throw invalid("Bad special document member: _revisions") }
        guard o["start"]?.intValue != nil else { throw invalid("_revisions.start isn't an integer.") }
        guard let ids = o["ids"]?.arrayValue else { throw invalid("_revisions.ids isn't a array.") }
        guard ids.allSatisfy({ $0.stringValue != nil }) else { throw invalid("RevId isn't a string") }
    }

    /// The history a replicated revision comes with: its `_revisions` (which must be well
    /// formed and start with `rev`), or `rev` alone when there is none.
    static func replicatedHistory(rev: String, revisions: JSONValue?) throws(RESTError) -> [String] {
        guard let revisions else { return [rev] }
        guard let history = history(from: revisions) else {
            throw .badRequest("_revisions must be {\"start\": N, \"ids\": [...]} with N at least the number of ids")
        }
        guard history.first == rev else { throw .badRequest("_revisions does not start with _rev") }
        return history
    }

    /// A replicated revision's stored properties: `_deleted` out (the store takes it apart), and
    /// every attachment entry without a `revpos` given `revpos` 0, as CouchDB stores one
    /// written with `new_edits: false` (a local save instead gets its generation, from the store).
    static func replicatedProperties(_ incoming: Incoming) -> [String: JSONValue] {
        var properties = incoming.properties
        properties.removeValue(forKey: "_deleted")
        if case .object(var entries)? = properties["_attachments"] {
            for (name, value) in entries {
                guard case .object(var meta) = value, meta["revpos"] == nil else { continue }
                meta["revpos"] = .int(0)
                entries[name] = .object(meta)
            }
            properties["_attachments"] = .object(entries)
        }
        return properties
    }

    /// A request body split into the stored properties and CouchDB's special members.
    struct Incoming {
        var properties: [String: JSONValue]
        var id: String?
        var rev: String?
        var revisions: JSONValue?
        var deleted: Bool
    }

    /// Takes `_id`, `_rev` and `_revisions` out of a body; `_deleted` and `_attachments` stay
    /// for the store, which refuses any other `_` member.
    static func incoming(_ body: [String: JSONValue]) -> Incoming {
        var p = body
        let id = p.removeValue(forKey: "_id")?.stringValue
        let rev = p.removeValue(forKey: "_rev")?.stringValue
        let revisions = p.removeValue(forKey: "_revisions")
        let deleted = p["_deleted"]?.boolValue ?? false
        return Incoming(properties: p, id: id, rev: rev, revisions: revisions, deleted: deleted)
    }
}
