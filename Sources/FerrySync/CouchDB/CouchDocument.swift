import FerryHTTP
import FerryStore
import FoundationEssentials

/// Revisions in CouchDB's JSON (Protocol/replication-http.md, "Documents"), both ways: a
/// `_bulk_get` document (`_id`, `_rev`, `_revisions`, `_deleted`, `_attachments` with base64
/// `data` or stubs) becomes a `ReplicatedRevision` whose attachments are blobs here; a stored
/// revision becomes the document `_bulk_docs` with `new_edits: false` takes.
enum CouchDocument {
    /// Why one document could not be taken (reported for that document; the replication goes on).
    struct Refusal: Error, Sendable {
        let reason: String
    }

    /// The members CouchDB adds that are not the document's own.
    private static let meta: Set<String> = ["_id", "_rev", "_revisions", "_deleted", "_conflicts", "_deleted_conflicts",
                                            "_local_seq", "_revs_info"]

    /// A `_bulk_get` document as a revision to insert. Inline attachments are written as blobs
    /// first; a stub (an attachment unchanged since a revision we have) takes the entry of the
    /// same name and digest from the revisions stored here.
    static func replicated(_ doc: [String: JSONValue], database db: Database) throws(Refusal) -> ReplicatedRevision {
        guard let id = doc["_id"]?.stringValue, let rev = doc["_rev"]?.stringValue else {
            throw Refusal(reason: "a document without _id or _rev")
        }
        let history: [String]
        if let revisions = doc["_revisions"] {
            guard let h = Self.history(from: revisions), h.first == rev else { throw Refusal(reason: "\(id): malformed _revisions") }
            history = h
        } else {
            history = [rev]
        }
        var body = doc
        for k in meta { body[k] = nil }
        if case .object(let entries)? = body["_attachments"] {
            body["_attachments"] = .object(try stored(entries, documentID: id, database: db))
        }
        return ReplicatedRevision(documentID: id, history: history, body: CanonicalJSON.encode(body),
                                  isDeleted: doc["_deleted"]?.boolValue ?? false)
    }

    /// CouchDB's `_revisions` (`{"start": N, "ids": [...]}`) as revision IDs, newest first.
    static func history(from revisions: JSONValue) -> [String]? {
        guard let o = revisions.objectValue, let start = o["start"]?.intValue, let ids = o["ids"]?.arrayValue,
              !ids.isEmpty, start >= Int64(ids.count) else { return nil }
        var out: [String] = []
        for (i, id) in ids.enumerated() {
            guard let digest = id.stringValue else { return nil }
            out.append("\(start - Int64(i))-\(digest)")
        }
        return out
    }

    /// Incoming `_attachments` entries as stored ones (blob digest, length, CouchDB's MD5).
    private static func stored(_ entries: [String: JSONValue], documentID id: String, database db: Database) throws(Refusal) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        var local: [String: [String: JSONValue]]?
        for (name, value) in entries {
            guard var m = value.objectValue else { throw Refusal(reason: "\(id): attachment \(name) is not an object") }
            if m["stub"] == nil, m["data"] == nil, let text = m["digest"]?.stringValue, let digest = try? BlobDigest(text),
               db.hasBlob(digest: digest) {
                // Fetched on its own already (`CouchPuller.fetchAttachments`): a stored entry.
                out[name] = .object(m)
                continue
            }
            if case .string(let text)? = m["data"] {
                guard var bytes = Data(base64Encoded: text).map(Array.init) else {
                    throw Refusal(reason: "\(id): attachment \(name) data is not base64")
                }
                if m["encoding"]?.stringValue?.lowercased() == "gzip" {
                    do { bytes = try Gzip.decode(bytes, limit: 256 << 20) } catch {
                        throw Refusal(reason: "\(id): attachment \(name) is not gzip data though it says so")
                    }
                }
                let blob: BlobMetadata
                do { blob = try db.writeBlob(bytes) } catch { throw Refusal(reason: "\(id): attachment \(name): \(error)") }
                for k in ["data", "stub", "follows", "encoding", "encoded_length"] { m[k] = nil }
                m["digest"] = .string(blob.digest.description)
                m["length"] = .int(blob.length)
                m[AttachmentMD5.member] = .string(AttachmentMD5.digest(bytes))
                out[name] = .object(m)
            } else {
                // A stub: the bytes are in a revision we have.
                if local == nil { local = storedEntries(of: id, database: db) }
                let digest = m["digest"]?.stringValue
                guard let entry = local?[name + "\n" + (digest ?? "")] ?? (digest == nil ? local?[name + "\n"] : nil) else {
                    throw Refusal(reason: "\(id): attachment \(name) came as a stub, but no stored revision has it")
                }
                out[name] = .object(entry)
            }
        }
        return out
    }

    /// Every stored attachment entry of the document's kept revisions, keyed by name and
    /// CouchDB digest (`name\nmd5-…`), and by name alone for entries without one.
    static func storedEntries(of id: String, database db: Database) -> [String: [String: JSONValue]] {
        guard let tree = try? db.revisionTree(of: id) else { return [:] }
        var out: [String: [String: JSONValue]] = [:]
        for node in tree.nodes.values {
            guard let body = node.body, let o = try? JSONParser.parseObject(body),
                  case .object(let entries)? = o["_attachments"] else { continue }
            for (name, value) in entries {
                guard let e = value.objectValue else { continue }
                out[name + "\n" + (e[AttachmentMD5.member]?.stringValue ?? "")] = e
                out[name + "\n"] = e
            }
        }
        return out
    }

    /// A stored revision as `_bulk_docs` (`new_edits: false`) takes it: its body with `_id`,
    /// `_rev`, `_revisions` and `_deleted`; an attachment goes as a stub when the newest of
    /// `targetHas` (the target's `possible_ancestors` from `_revs_diff`) that is an ancestor of
    /// `revision` here holds the same bytes under the same name (the target then has them),
    /// else inline as base64.
    static func json(id: String, revision: RevisionID, tree: RevisionTree, database db: Database,
                     targetHas: [RevisionID]) -> Outgoing? {
        guard let node = tree.nodes[revision], let body = node.body else { return nil }
        // A closing tombstone keeps its `ferry:closed` marker, as Ferry's REST serves it to
        // CouchDB's own replicator: the same revision has the same body whichever way it went.
        guard var o = try? JSONParser.parseObject(body) else { return nil }
        o["_id"] = .string(id)
        o["_rev"] = .string(revision.description)
        let history = tree.history(of: revision)
        o["_revisions"] = .object(["start": .int(Int64(revision.generation)), "ids": .array(history.map { .string($0.digest) })])
        if node.isDeleted { o["_deleted"] = true }
        var parts: [Part] = []
        if case .object(let entries)? = o["_attachments"] {
            let ancestor = targetHas.filter { $0 != revision && tree.isAncestor($0, of: revision) }.max()
            let known = ancestor.flatMap { tree.nodes[$0]?.body }.flatMap { try? JSONParser.parseObject($0) }?["_attachments"]?.objectValue ?? [:]
            var out: [String: JSONValue] = [:]
            // In name order: the order CanonicalJSON writes the entries in, which is the order
            // the parts must come in (CouchDB pairs `follows` entries with parts by order).
            for (name, value) in entries.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                guard var m = value.objectValue else { continue }
                let md5 = m.removeValue(forKey: AttachmentMD5.member)
                let blobDigest = m["digest"]?.stringValue
                if let md5 { m["digest"] = md5 }
                m["follows"] = nil
                if md5 != nil, let blobDigest, known[name]?.objectValue?["digest"]?.stringValue == blobDigest {
                    m["stub"] = true
                } else if let text = blobDigest, let digest = try? BlobDigest(text), let bytes = try? db.readBlob(digest: digest).readAll() {
                    if md5 == nil { m["digest"] = .string(AttachmentMD5.digest(bytes)) }
                    m["stub"] = nil
                    if bytes.count > inlineLimit {
                        // Raw bytes in a part of their own, not a third larger in base64 JSON.
                        m["follows"] = true
                        m["length"] = .int(Int64(bytes.count))
                        parts.append(Part(name: name, contentType: m["content_type"]?.stringValue ?? "application/octet-stream", bytes: bytes))
                    } else {
                        m["data"] = .string(Data(bytes).base64EncodedString())
                    }
                } else {
                    // Not here (a download policy skipped it): only the target can have it.
                    m["stub"] = true
                }
                out[name] = .object(m)
            }
            o["_attachments"] = .object(out)
        }
        return Outgoing(doc: o, parts: parts)
    }

    /// Attachments up to this size go inline (base64 in `_bulk_docs`); a larger one makes its
    /// document go alone as `multipart/related` (`CouchPusher`), as CouchDB's replicator does.
    static let inlineLimit = 64 * 1024

    /// A document to push, and the bytes of its `"follows": true` attachments, in order.
    struct Outgoing: Sendable {
        var doc: [String: JSONValue]
        var parts: [Part]
    }

    /// One attachment sent as a part of a `multipart/related` body.
    struct Part: Sendable {
        let name: String
        let contentType: String
        let bytes: [UInt8]
    }

    /// `PUT /db/doc?new_edits=false`'s `multipart/related` body (RFC 2387; CouchDB's
    /// "Creating Multiple Attachments"): the document as JSON, then each part's bytes, and the
    /// `Content-Type` naming the boundary.
    static func multipart(_ outgoing: Outgoing) -> (contentType: String, body: [UInt8]) {
        let boundary = "ferry-" + UUID().uuidString.lowercased()
        let dash = Array("--\(boundary)\r\n".utf8)
        var body = dash + Array("Content-Type: application/json\r\n\r\n".utf8) + CanonicalJSON.encode(.object(outgoing.doc)) + [13, 10]
        for p in outgoing.parts {
            let name = p.name.replacing("\"", with: "\\\"")
            body += dash + Array("Content-Type: \(p.contentType)\r\nContent-Disposition: attachment; filename=\"\(name)\"\r\nContent-Length: \(p.bytes.count)\r\n\r\n".utf8)
            body += p.bytes + [13, 10]
        }
        body += Array("--\(boundary)--".utf8)
        return ("multipart/related; boundary=\"\(boundary)\"", body)
    }
}
