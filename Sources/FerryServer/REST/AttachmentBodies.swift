import FerryStore
import FerrySync
import FoundationEssentials

/// Attachments carried inside document bodies on the way in (Protocol/rest.md, "Attachments"):
/// inline base64 `data` and `multipart/related` parts (`"follows": true`) are written as blobs
/// before the save, so the store only ever sees metadata; `"stub": true` entries keep the
/// attachment the parent revision has. The way out is `AttachmentRendering`.
extension RESTRouter {
    /// The body of a document `PUT`: a JSON object, or the first part of a `multipart/related`
    /// upload with the following parts stored as the blobs of its `"follows": true` entries.
    func documentBody(_ c: Context, id: String) throws(RESTError) -> [String: JSONValue] {
        let type = c.request.header("Content-Type")
        guard MultipartRelated.isMultipartRelated(type), let type else { return try Self.jsonObject(c.request, strict: false) }
        let multipart = try MultipartRelated(contentType: type, body: c.request.body)
        let first = multipart.parts[0]
        if let t = first.header("content-type"), !t.lowercased().hasPrefix("application/json") {
            throw .badRequest("the first part of a multipart/related document must be application/json")
        }
        let json = Array(first.body)
        let body: [String: JSONValue]
        do { body = try JSONParser.parseObject(json, sizeLimit: json.count + 1) } catch {
            throw .badRequest("the first multipart part must be a JSON object: \(error)")
        }
        let following = try Self.bindFollowingParts(Array(multipart.parts.dropFirst()), body: body, json: json)
        return try Self.storingAttachmentData(c.db, id: id, body: body, parentRevs: Self.parentRevisions(c, body),
                                              following: following)
    }

    /// `body` with its inline and following attachment bytes stored as blobs and its stubs
    /// filled from the parent revision (what a document `PUT`/`POST` calls before saving).
    func storingAttachmentData(_ c: Context, id: String, body: [String: JSONValue]) throws(RESTError) -> [String: JSONValue] {
        guard body["_attachments"] != nil else { return body }
        return try Self.storingAttachmentData(c.db, id: id, body: body, parentRevs: Self.parentRevisions(c, body), following: [:])
    }

    /// The revisions a write's stubs may refer to, nearest first: the one named by `?rev=`,
    /// `If-Match` or `_rev`, then the rest of its `_revisions` history (a replicated write's
    /// `_rev` is the new revision: its stubs name attachments of its nearest stored ancestor,
    /// which is how CouchDB's replicator pushes a document whose body alone changed).
    static func parentRevisions(_ c: Context?, _ body: [String: JSONValue]) -> [String] {
        var out: [String] = []
        if let c, let named = try? namedRevision(c.request, body: body["_rev"]?.stringValue) {
            out.append(named)
        } else if let rev = body["_rev"]?.stringValue {
            out.append(rev)
        }
        for rev in DocumentJSON.history(from: body["_revisions"]) ?? [] where !out.contains(rev) { out.append(rev) }
        return out
    }

    /// Writes every `data` and `follows` attachment of `body` as a blob and replaces the entry
    /// by metadata (`digest`, `length`, `content_type`, the MD5 CouchDB clients compare, and
    /// `revpos` if the client gave one); gzip-encoded ones (`"encoding":"gzip"` or a part with
    /// `Content-Encoding: gzip`, as CouchDB sends its compressible types) are decoded first. A
    /// `stub` entry keeps a `sha1-` digest it names; otherwise (no digest, or CouchDB's `md5-`)
    /// it takes the entry of the same name from the nearest stored revision of `parentRevs`
    /// (or the current one), else 412 `missing_stub`. Entries the store would refuse are left
    /// for it to refuse with its own reason.
    static func storingAttachmentData(_ db: Database, id: String?, body: [String: JSONValue], parentRevs: [String],
                                      following: [String: MultipartRelated.Part]) throws(RESTError) -> [String: JSONValue] {
        guard case .object(var members)? = body["_attachments"] else { return body }
        var parentEntries: [String: JSONValue]?
        var changed = false
        for (name, value) in members {
            guard case .object(var meta) = value else { continue }
            if let data = meta["data"] {
                guard case .string(let text) = data, let bytes = Data(base64Encoded: text) else {
                    throw .badRequest("attachment \(name.debugDescription): data must be base64")
                }
                meta = try storeBlob(db, Array(bytes)[...], meta: meta, name: name, partEncoding: nil)
            } else if meta["follows"]?.boolValue == true {
                guard let part = following[name] else {
                    throw .badRequest("attachment \(name.debugDescription) follows, but no multipart part carries it")
                }
                meta = try storeBlob(db, part.body, meta: meta, name: name, partEncoding: part.header("content-encoding"))
            } else if meta["stub"]?.boolValue == true {
                let digest = meta["digest"]?.stringValue
                if digest.flatMap({ try? BlobDigest($0) }) == nil {
                    if parentEntries == nil { parentEntries = try storedAttachments(db, id: id, revs: parentRevs) }
                    guard let old = parentEntries?[name]?.objectValue, Self.stub(meta, matches: old) else {
                        throw RESTError(412, "missing_stub", "Invalid attachment stub in \(id ?? "the document") for \(name)")
                    }
                    meta = old
                }
                for key in ["stub", "encoding", "encoded_length"] { meta[key] = nil }
            } else {
                continue
            }
            members[name] = .object(meta)
            changed = true
        }
        guard changed else { return body }
        var out = body
        out["_attachments"] = .object(members)
        return out
    }

    /// Whether a stub can stand for the stored entry `old` of its name: an `md5-` digest it
    /// states must be the entry's, and a `revpos` it states must be the entry's unless the
    /// digests agree (CouchDB's `missing_stub` rule, couch_att:merge_stubs).
    private static func stub(_ stub: [String: JSONValue], matches old: [String: JSONValue]) -> Bool {
        let md5 = stub["digest"]?.stringValue
        if let md5, md5.hasPrefix("md5-"), let known = old[AttachmentMD5.member]?.stringValue {
            return md5 == known
        }
        if let revpos = stub["revpos"]?.intValue, let stored = old["revpos"]?.intValue { return revpos == stored }
        return true
    }

    /// Stores an attachment's bytes (decoded if they come gzip-encoded) and returns the
    /// entry's metadata pointing at the blob.
    private static func storeBlob(_ db: Database, _ raw: ArraySlice<UInt8>, meta: [String: JSONValue], name: String,
                                  partEncoding: String?) throws(RESTError) -> [String: JSONValue] {
        let encoding = (meta["encoding"]?.stringValue ?? partEncoding)?.lowercased()
        let bytes: [UInt8]
        switch encoding {
        case nil, "identity":
            bytes = Array(raw)
            if let stated = meta["length"]?.intValue, stated != Int64(bytes.count) {
                throw .badRequest("attachment \(name.debugDescription) states length \(stated) but carries \(bytes.count) bytes")
            }
        case "gzip":
            if let stated = meta["encoded_length"]?.intValue, stated != Int64(raw.count) {
                throw .badRequest("attachment \(name.debugDescription) states encoded_length \(stated) but carries \(raw.count) bytes")
            }
            bytes = try GzipAttachment.decode(raw, expectedLength: meta["length"]?.intValue, name: name)
        case let other?:
            throw RESTError(415, "bad_content_type", "attachment \(name.debugDescription): encoding \(other.debugDescription) is not supported (only gzip)")
        }
        let blob: BlobMetadata
        do { blob = try db.writeBlob(bytes) } catch { throw RESTError(error) }
        var out = meta
        for key in ["data", "follows", "stub", "encoding", "encoded_length"] { out[key] = nil }
        out["digest"] = .string(blob.digest.description)
        out["length"] = .int(blob.length)
        out[AttachmentMD5.member] = .string(AttachmentMD5.digest(bytes))
        return out
    }

    /// The `_attachments` members of the first of `revs` that is kept, else of the current
    /// revision; empty when there is none.
    private static func storedAttachments(_ db: Database, id: String?, revs: [String]) throws(RESTError) -> [String: JSONValue] {
        guard let id else { return [:] }
        do {
            var doc: Document?
            for text in revs {
                if let r = try? RevisionID(text), let d = try db.revision(r, of: id) { doc = d; break }
            }
            if doc == nil { doc = try db.document(id, includeDeleted: true) }
            return doc?.properties["_attachments"]?.objectValue ?? [:]
        } catch { throw RESTError(error) }
    }

    /// Pairs the parts after the document with its `"follows": true` entries: a part whose
    /// `Content-Disposition` names an entry goes to it (CouchDB's replicator names them),
    /// any other to the next unpaired entry in the order the JSON text lists them (RFC 2387
    /// has no names; CouchDB pairs by order). Every entry needs exactly one part.
    static func bindFollowingParts(_ parts: [MultipartRelated.Part], body: [String: JSONValue],
                                   json: [UInt8]) throws(RESTError) -> [String: MultipartRelated.Part] {
        let members = body["_attachments"]?.objectValue ?? [:]
        let follows = Set(members.filter { $0.value.objectValue?["follows"]?.boolValue == true }.keys)
        // Names in text order; any the walk missed (it cannot, for a parsed body) go last, sorted.
        var order = AttachmentKeyOrder.names(in: json).filter { follows.contains($0) }
        var seen = Set<String>()
        order = order.filter { seen.insert($0).inserted }
        order += follows.subtracting(seen).sorted()
        var bound: [String: MultipartRelated.Part] = [:]
        for part in parts {
            if let name = part.filename, follows.contains(name), bound[name] == nil {
                bound[name] = part
            } else if let next = order.first(where: { bound[$0] == nil }) {
                bound[next] = part
            } else {
                throw .badRequest("more multipart parts than attachments marked follows")
            }
        }
        guard bound.count == follows.count else {
            throw .badRequest("\(follows.count - bound.count) attachment(s) marked follows have no multipart part")
        }
        return bound
    }
}

/// The names of a JSON document's `_attachments` members in the order the text lists them
/// (a parsed `JSONValue` object has no order, and a multipart upload pairs parts by it).
/// Runs on text `JSONParser` has already accepted; on anything else it stops early and
/// returns what it found, never reading out of bounds.
enum AttachmentKeyOrder {
    static func names(in json: [UInt8]) -> [String] {
        var w = Walker(b: json)
        w.space()
        guard w.at(UInt8(ascii: "{")) else { return [] }
        w.i += 1
        var out: [String] = []
        while let key = w.key() {
            w.space()
            if key == "_attachments", w.at(UInt8(ascii: "{")) {
                w.i += 1
                while let name = w.key() {
                    out.append(name)
                    guard w.skipValue(), w.next() else { break }
                }
                return out
            }
            guard w.skipValue(), w.next() else { break }
        }
        return out
    }

    private struct Walker {
        let b: [UInt8]
        var i = 0

        func at(_ c: UInt8) -> Bool { i < b.count && b[i] == c }

        mutating func space() {
            while i < b.count, b[i] == 32 || b[i] == 9 || b[i] == 10 || b[i] == 13 { i += 1 }
        }

        /// A string's raw range, quotes included.
        mutating func string() -> Range<Int>? {
            guard at(34) else { return nil }
            let start = i
            i += 1
            while i < b.count {
                if b[i] == 92 { i += 2; continue }
                if b[i] == 34 { i += 1; return start..<i }
                i += 1
            }
            return nil
        }

        /// The next member's key, positioned after its colon; nil at `}` or on bad input.
        mutating func key() -> String? {
            space()
            guard let r = string() else { return nil }
            space()
            guard at(UInt8(ascii: ":")) else { return nil }
            i += 1
            return (try? JSONParser.parse(Array(b[r])))?.stringValue
        }

        mutating func skipValue() -> Bool {
            space()
            guard i < b.count else { return false }
            switch b[i] {
            case 34: return string() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while i < b.count {
                    switch b[i] {
                    case 34:
                        guard string() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { i += 1; return true }
                    default: break
                    }
                    i += 1
                }
                return false
            default:
                while i < b.count, b[i] != UInt8(ascii: ","), b[i] != UInt8(ascii: "}"), b[i] != UInt8(ascii: "]") { i += 1 }
                return true
            }
        }

        /// Past the `,` before another member; false at the object's end.
        mutating func next() -> Bool {
            space()
            guard at(UInt8(ascii: ",")) else { return false }
            i += 1
            return true
        }
    }
}
