import FerryHTTP
import FerryStore
import FerrySync
import FoundationEssentials
import Synchronization

/// `GET|HEAD|PUT|DELETE /{db}/{docid}/{attname}` (Protocol/rest.md, "Attachments"): an
/// attachment's bytes with their `Content-Type`, the digest as `ETag` and one byte `Range`
/// (206, or 416 outside the attachment); a `PUT` of raw bytes or a `DELETE` makes a new
/// revision of the document, naming the one it replaces unless the document is new.
extension RESTRouter {
    /// Answers one attachment request; writes need the writer role (the admin role for a
    /// design document's attachments).
    func attachment(_ c: Context, _ docID: String, _ name: String) async throws(RESTError) -> RESTResponse {
        switch c.request.method {
        case "GET", "HEAD": return try readAttachment(c, docID, name)
        case "PUT":
            try requireWriteAccess(c, to: docID)
            return try await putAttachment(c, docID, name)
        case "DELETE":
            try requireWriteAccess(c, to: docID)
            return try await deleteAttachment(c, docID, name)
        default: throw .methodNotAllowed("DELETE,GET,HEAD,PUT")
        }
    }

    /// Blobs up to this size are answered from memory with a `Content-Length`; larger ones are
    /// streamed (chunked) so a large attachment is never held whole.
    static let attachmentMemoryLimit: Int64 = 4 << 20

    private func readAttachment(_ c: Context, _ docID: String, _ name: String) throws(RESTError) -> RESTResponse {
        do {
            let doc: Document
            if let revText = c.request[query: "rev"] {
                guard let rev = try Self.parseRevision(revText), let d = try c.db.revision(rev, of: docID) else { throw RESTError.notFound("missing") }
                doc = d
            } else {
                guard let d = try c.db.document(docID) else {
                    throw RESTError.notFound(try c.db.documentJSON(docID) == nil ? "missing" : "deleted")
                }
                doc = d
            }
            guard let a = try c.db.attachments(of: doc).first(where: { $0.name == name }) else {
                throw RESTError.notFound("Document is missing attachment")
            }
            guard a.isFetched else { throw RESTError.notFound("the attachment's bytes are not on this server") }
            let etag = "\"\(a.digest)\""
            if c.request.header("If-None-Match") == etag { return RESTResponse(status: 304, headers: [("ETag", etag)]) }
            var headers: [(name: String, value: String)] = [
                ("Content-Type", a.contentType ?? "application/octet-stream"), ("ETag", etag), ("Accept-Ranges", "bytes"),
            ]
            let reader = try c.db.readBlob(digest: a.digest)
            let length = reader.length
            switch Self.byteRange(c.request.header("Range"), length: length) {
            case .whole:
                if c.request.method == "GET", length <= Self.attachmentMemoryLimit,
                   GzipAttachment.isCompressible(a.contentType), GzipAttachment.accepted(by: c.request.header("Accept-Encoding")) {
                    // CouchDB serves compressible attachments gzip-encoded to a client that takes
                    // gzip (it stores them so); Ferry stores them decoded and encodes here, up to
                    // the in-memory limit (a larger one streams as it is).
                    headers += [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
                    return RESTResponse(status: 200, headers: headers, body: .bytes(GzipAttachment.encode(try reader.readAll())))
                }
                return RESTResponse(status: 200, headers: headers, body: try Self.blobBody(reader, from: 0, count: length, head: c.request.method == "HEAD"))
            case .part(let lo, let hi):
                headers.append(("Content-Range", "bytes \(lo)-\(hi)/\(length)"))
                return RESTResponse(status: 206, headers: headers,
                                    body: try Self.blobBody(reader, from: lo, count: hi - lo + 1, head: c.request.method == "HEAD"))
            case .parts(let ranges):
                // CouchDB's multipart/byteranges: each range a part with the attachment's type
                // and its Content-Range (RFC 9110 §14.6). The attachment is read once, whole:
                // ranges are for attachments small enough to hold (larger ones stream above).
                let bytes = try Self.blobBody(reader, from: 0, count: length, head: true)
                guard case .bytes(let all) = bytes else { throw RESTError(500, "internal_server_error", "attachment not read") }
                var w = MultipartWriter()
                for (lo, hi) in ranges {
                    w.part([("Content-Type", a.contentType ?? "application/octet-stream"), ("Content-Range", "bytes \(lo)-\(hi)/\(length)")],
                           Array(all[Int(lo)...Int(hi)]))
                }
                // CouchDB's multipart range answer carries no ETag.
                headers = [("Content-Type", w.contentType("byteranges")), ("Accept-Ranges", "bytes")]
                return RESTResponse(status: 206, headers: headers, body: .bytes(c.request.method == "HEAD" ? [] : w.finished()))
            case .unsatisfiable:
                var r = RESTError(416, "requested_range_not_satisfiable", "Requested range not satisfiable").response
                r.headers.append(("Content-Range", "bytes */\(length)"))
                return r
            }
        } catch {
            throw RESTError.from(error)
        }
    }

    private func putAttachment(_ c: Context, _ docID: String, _ name: String) async throws(RESTError) -> RESTResponse {
        guard !name.hasPrefix("_") else { throw .badRequest("Attachment name must not start with '_'") }
        let revText = try Self.namedRevision(c.request, body: nil)
        var doc = try Self.revisionToEdit(c.db, docID, revText, newAllowed: true)
        // A gzip-encoded body is stored decoded, as CouchDB serves it (415 for other codings).
        let content = try c.request.decodedBody()
        do {
            let blob = try c.db.writeBlob(content)
            doc.setAttachment(name, blob: blob, contentType: c.request.header("Content-Type") ?? "application/octet-stream")
            // CouchDB's digest beside Ferry's, for the clients that compare it (AttachmentMD5).
            if case .object(var members)? = doc.properties["_attachments"], case .object(var meta)? = members[name] {
                meta[AttachmentMD5.member] = .string(AttachmentMD5.digest(c.request.body))
                members[name] = .object(meta)
                doc.properties["_attachments"] = .object(members)
            }
            let edited = doc
            let saved = try await c.db.write { (d) throws(StoreError) in try d.save(edited, concurrencyControl: .failOnConflict) }
            let rev = saved.revisionID?.description ?? ""
            let location = "/" + [c.name, docID, name].map { PercentEncoding.encode($0) }.joined(separator: "/")
            // CouchDB answers an attachment write with Location but no ETag.
            return .json(201, .object(["ok": true, "id": .string(docID), "rev": .string(rev)]), headers: [("Location", location)])
        } catch { throw RESTError(error) }
    }

    private func deleteAttachment(_ c: Context, _ docID: String, _ name: String) async throws(RESTError) -> RESTResponse {
        guard let revText = try Self.namedRevision(c.request, body: nil) else { throw .conflict }
        var doc = try Self.revisionToEdit(c.db, docID, revText, newAllowed: false)
        guard doc.properties["_attachments"]?.objectValue?[name] != nil else { throw .notFound("Document is missing attachment") }
        doc.removeAttachment(name)
        let edited = doc
        do {
            let saved = try await c.db.write { (d) throws(StoreError) in try d.save(edited, concurrencyControl: .failOnConflict) }
            let rev = saved.revisionID?.description ?? ""
            // CouchDB answers an attachment deletion without ETag.
            return .json(200, .object(["ok": true, "id": .string(docID), "rev": .string(rev)]))
        } catch { throw RESTError(error) }
    }

    /// The document an attachment write changes: a child of revision `revText` with its
    /// properties (a tombstone's are dropped: the write revives the document), or with no
    /// revision a new document (409 if a live one exists). A revision that is not here is 409,
    /// as a stale one is; the save itself refuses one that is not the current leaf.
    private static func revisionToEdit(_ db: Database, _ docID: String, _ revText: String?, newAllowed: Bool) throws(RESTError) -> Document {
        do {
            guard let revText else {
                guard newAllowed, try db.document(docID) == nil else { throw RESTError.conflict }
                return Document(id: docID, basedOn: nil, properties: [:])
            }
            guard let rev = try? RevisionID(revText) else { throw RESTError.badRequest("Invalid rev format: \(revText.debugDescription)") }
            guard let parent = try db.revision(rev, of: docID) else { throw RESTError.conflict }
            var properties = parent.isDeleted ? [:] : parent.properties
            properties["_deleted"] = nil
            return Document(id: docID, basedOn: rev, properties: properties)
        } catch {
            throw RESTError.from(error)
        }
    }

    /// What a `Range` header asks of a body of `length` bytes (RFC 9110 §14.1.2).
    enum ByteRange: Equatable {
        /// No range, one Ferry ignores (another unit, bad syntax) or several: the whole body.
        case whole
        /// Bytes `lo` through `hi`, both included and inside the body.
        case part(Int64, Int64)
        /// A range that starts past the end (or an empty suffix): 416.
        case unsatisfiable
        /// Several ranges, each inside the body: a 206 `multipart/byteranges`.
        case parts([(Int64, Int64)])

        static func == (a: ByteRange, b: ByteRange) -> Bool {
            switch (a, b) {
            case (.whole, .whole), (.unsatisfiable, .unsatisfiable): return true
            case let (.part(x, y), .part(z, w)): return x == z && y == w
            case let (.parts(x), .parts(y)): return x.count == y.count && zip(x, y).allSatisfy { $0 == $1 }
            default: return false
            }
        }
    }

    /// Parses `bytes=a-b`, `bytes=a-` and `bytes=-n`, and lists of them as CouchDB does: up to
    /// 9 ranges, each satisfiable, are parts of a multipart answer; more, or any one that is
    /// malformed or outside the body, and the whole body is answered (RFC 9110 lets a server
    /// ignore `Range`).
    static func byteRange(_ header: String?, length: Int64) -> ByteRange {
        guard let h = header?.trimmingASCIIWhitespace(), h.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = h.dropFirst("bytes=".count)
        if spec.contains(",") {
            let items = spec.split(separator: ",", omittingEmptySubsequences: false)
            guard items.count < 10 else { return .whole }
            var ranges: [(Int64, Int64)] = []
            for item in items {
                guard case .part(let lo, let hi) = byteRange("bytes=" + item.trimmingASCIIWhitespace(), length: length) else {
                    return .whole
                }
                ranges.append((lo, hi))
            }
            return .parts(ranges)
        }
        let ends = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard ends.count == 2 else { return .whole }
        let first = ends[0].trimmingASCIIWhitespace(), last = ends[1].trimmingASCIIWhitespace()
        func number(_ s: String) -> Int64? { s.isEmpty || !s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) ? nil : Int64(s) }
        if first.isEmpty {
            guard let n = number(last) else { return .whole }
            guard n > 0, length > 0 else { return .unsatisfiable }
            return .part(max(0, length - n), length - 1)
        }
        guard let lo = number(first) else { return .whole }
        var hi = length - 1
        if !last.isEmpty {
            guard let b = number(last), b >= lo else { return .whole }
            hi = min(b, length - 1)
        }
        guard lo < length else { return .unsatisfiable }
        return .part(lo, hi)
    }

    /// `count` bytes of the blob from `from`: read now when small (or for a `HEAD`, whose
    /// `Content-Length` must be right), else streamed as the client reads.
    static func blobBody(_ reader: sending BlobReader, from offset: Int64, count: Int64, head: Bool) throws(StoreError) -> RESTResponse.Body {
        if head || count <= attachmentMemoryLimit {
            var skip = offset
            while skip > 0 {
                let chunk = try reader.read(max: Int(min(skip, Int64(BlobReader.chunkSize))))
                guard !chunk.isEmpty else { break }
                skip -= Int64(chunk.count)
            }
            var out: [UInt8] = []
            out.reserveCapacity(Int(clamping: count))
            while Int64(out.count) < count {
                let chunk = try reader.read(max: Int(min(count - Int64(out.count), Int64(BlobReader.chunkSize))))
                guard !chunk.isEmpty else { break }
                out += chunk
            }
            return .bytes(out)
        }
        let source = BlobRangeSource(reader, offset: offset, count: count)
        return .stream(AsyncStream(unfolding: { source.next() }))
    }
}

/// Reads part of one blob chunk by chunk as a streamed answer pulls it, so memory stays at
/// one chunk whatever the blob's size. A read error ends the stream early.
final class BlobRangeSource: Sendable {
    private struct State {
        let reader: BlobReader
        var skip: Int64
        var left: Int64
    }

    private let state: Mutex<State>

    init(_ reader: sending BlobReader, offset: Int64, count: Int64) {
        state = Mutex(State(reader: reader, skip: offset, left: count))
    }

    /// The next chunk, or nil at the end.
    func next() -> [UInt8]? {
        state.withLock { s -> [UInt8]? in
            do {
                while s.skip > 0 {
                    let chunk = try s.reader.read(max: Int(min(s.skip, Int64(BlobReader.chunkSize))))
                    guard !chunk.isEmpty else { return nil }
                    s.skip -= Int64(chunk.count)
                }
                guard s.left > 0 else {
                    s.reader.close()
                    return nil
                }
                let chunk = try s.reader.read(max: Int(min(s.left, Int64(BlobReader.chunkSize))))
                guard !chunk.isEmpty else { return nil }
                s.left -= Int64(chunk.count)
                return chunk
            } catch {
                return nil
            }
        }
    }
}
