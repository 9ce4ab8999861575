import FerryStore
import FerrySync
import FoundationEssentials

/// Attachments on the way out (Protocol/rest.md, "Attachments"), in CouchDB's shapes: a stub is
/// `{"content_type","revpos","digest","length","stub":true}` with CouchDB's `md5-` digest when
/// Ferry knows it (else Ferry's `sha1-`); `attachments=true` puts the bytes in as base64
/// `data`, a multipart answer marks them `"follows": true` and sends them as parts. With
/// `atts_since`, only attachments changed after the newest listed ancestor carry bytes.
enum AttachmentRendering {
    /// What a read does with each attachment that is new enough to carry bytes.
    enum Mode {
        /// Stubs only.
        case stubs
        /// Bytes inline as base64 `data`.
        case inline
        /// `"follows": true`, the bytes returned as parts in entry order.
        case follows
    }

    /// An attachment sent as a multipart part.
    struct Part {
        let name: String
        let contentType: String
        let bytes: [UInt8]
    }

    /// A stored entry as CouchDB shows a stub. The `md5-` digest takes `digest`'s place when
    /// known: CouchDB clients compare it, and a stub sent back with it is matched by name.
    static func stub(_ meta: [String: JSONValue]) -> [String: JSONValue] {
        var out = shown(meta)
        out["stub"] = true
        return out
    }

    /// The entry's members a client sees (the digest CouchDB clients compare as `digest`).
    private static func shown(_ meta: [String: JSONValue]) -> [String: JSONValue] {
        var out = meta
        if case .string(let md5)? = out.removeValue(forKey: AttachmentMD5.member), md5.hasPrefix("md5-") {
            out["digest"] = .string(md5)
        }
        return out
    }

    /// A document object (`_id`, `_rev`, … with stored `_attachments`) with every entry a stub.
    static func stubbed(_ doc: [String: JSONValue]) -> [String: JSONValue] {
        guard case .object(let members)? = doc["_attachments"] else { return doc }
        var out = doc
        out["_attachments"] = .object(members.mapValues { v in v.objectValue.map { .object(stub($0)) } ?? v })
        return out
    }

    /// A document object with stored `_attachments` rendered for `mode`: entries whose
    /// `revpos` is after `sinceGeneration` (nil: no `atts_since` was asked, so every entry)
    /// and whose blob is here carry their bytes; every other one is a stub. Parts come in name
    /// order, which is the order CanonicalJSON writes the entries in, so a reader pairing parts
    /// by order (RFC 2387, CouchDB) pairs them right.
    static func render(_ db: Database, _ doc: [String: JSONValue], mode: Mode, sinceGeneration: Int? = nil)
        -> (doc: [String: JSONValue], parts: [Part]) {
        guard case .object(let members)? = doc["_attachments"] else { return (doc, []) }
        guard mode != .stubs else { return (stubbed(doc), []) }
        var out: [String: JSONValue] = [:]
        var parts: [Part] = []
        for (name, value) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            guard case .object(let meta) = value else { out[name] = value; continue }
            let revpos = meta["revpos"]?.intValue.map(Int.init) ?? Int.max
            guard revpos > (sinceGeneration ?? -1), let text = meta["digest"]?.stringValue, let digest = try? BlobDigest(text),
                  let bytes = try? db.readBlob(digest: digest).readAll() else {
                out[name] = .object(stub(meta))
                continue
            }
            var entry = shown(meta)
            switch mode {
            case .inline:
                // CouchDB's inline entry carries `data` instead of `length` (couch_att:to_json).
                entry["length"] = nil
                entry["data"] = .string(Data(bytes).base64EncodedString())
            case .follows:
                entry["follows"] = true
                parts.append(Part(name: name, contentType: meta["content_type"]?.stringValue ?? "application/octet-stream", bytes: bytes))
            case .stubs: break
            }
            out[name] = .object(entry)
        }
        var rendered = doc
        rendered["_attachments"] = .object(out)
        return (rendered, parts)
    }

    /// The generation of the newest revision in `attsSince` that is `rev` or one of its
    /// ancestors (0 if none is): attachments with a `revpos` up to it are ones the client
    /// already has (CouchDB's `atts_since`). Nil without `atts_since`: then even an attachment
    /// stored with `revpos` 0 (CouchDB keeps one written inline with `new_edits:false` so)
    /// carries its bytes, as CouchDB sends it; with `atts_since` CouchDB stubs it, and so do we.
    static func sinceGeneration(_ attsSince: [String]?, rev: RevisionID?, tree: RevisionTree?) -> Int? {
        guard let attsSince else { return nil }
        guard let rev, let tree, !attsSince.isEmpty else { return 0 }
        let history = Set(tree.history(of: rev).map(\.description))
        return attsSince.filter { history.contains($0) }.compactMap { try? RevisionID($0).generation }.max() ?? 0
    }

    /// `atts_since=[…]` of a request (a JSON array of revision IDs); nil when absent.
    static func attsSince(_ request: RESTRequest) throws(RESTError) -> [String]? {
        guard let text = request[query: "atts_since"] else { return nil }
        guard case .array(let a)? = try? JSONParser.parse(Array(text.utf8)) else {
            throw .badRequest("atts_since must be a JSON array of revisions")
        }
        return a.compactMap(\.stringValue)
    }
}
