@testable import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Testing

/// The codecs behind attachments as CouchDB's replicator moves them (issue 30, item 6): the
/// multipart writer read back by Ferry's own parser, gzip-encoded attachments, CouchDB's
/// `md5-` digest and stub shape, and the REST routes a replicator uses, against a live daemon.
@Suite("REST attachments: multipart/mixed, gzip, stubs, atts_since")
struct AttachmentCodecTests {
    @Test func multipartWriterRoundTripsThroughTheParser() throws {
        let binary: [UInt8] = [0, 13, 10, 45, 45, 255, 13, 10, 13, 10]
        let (type, body) = MultipartWriter.related(json: Array(#"{"a":1}"#.utf8),
                                                   parts: [.init(name: "x\r\n\"y", contentType: "application/octet-stream", bytes: binary),
                                                           .init(name: "e", contentType: "text/plain", bytes: [])],
                                                   boundary: "b0undary")
        #expect(type == #"multipart/related; boundary="b0undary""#)
        let parsed = try MultipartRelated(contentType: type, body: body)
        #expect(parsed.parts.count == 3)
        #expect(Array(parsed.parts[0].body) == Array(#"{"a":1}"#.utf8))
        #expect(parsed.parts[0].header("content-type") == "application/json")
        #expect(Array(parsed.parts[1].body) == binary)
        #expect(parsed.parts[1].header("content-length") == "10")
        // A name with a line break cannot split the header line.
        #expect(parsed.parts[1].header("content-disposition") == #"attachment; filename="x__\"y""#)
        #expect(parsed.parts[2].body.isEmpty)

        // multipart/mixed nests a related part whole.
        var mixed = MultipartWriter(boundary: "outer")
        mixed.part([("Content-Type", "application/json")], Array("{}".utf8))
        mixed.part([("Content-Type", type)], body)
        let outer = try MultipartRelated(contentType: mixed.contentType("mixed"), body: mixed.finished())
        #expect(outer.parts.count == 2)
        #expect(outer.parts[1].header("content-type") == type)
        #expect(try MultipartRelated(contentType: type, body: Array(outer.parts[1].body)).parts.count == 3)
    }

    @Test func gzipDecodesAndRefusesWhatIsNotTheStatedAttachment() throws {
        let text = Array(String(repeating: "hello world line\n", count: 100).utf8)
        let gz = GzipAttachment.encode(text)
        #expect(gz.count < text.count && gz.starts(with: [0x1f, 0x8b]))
        #expect(try GzipAttachment.decode(gz[...], expectedLength: Int64(text.count), name: "n") == text)
        #expect(try GzipAttachment.decode(gz[...], expectedLength: nil, name: "n") == text)
        // Two members are one body (RFC 1952 §2.2).
        #expect(try GzipAttachment.decode((gz + GzipAttachment.encode([65]))[...], expectedLength: nil, name: "n") == text + [65])
        #expect(try GzipAttachment.decode(GzipAttachment.encode([])[...], expectedLength: 0, name: "n") == [])
        for (bytes, length) in [(gz, Int64(text.count + 1)), (gz, 10), (Array(gz.dropLast(4)), Int64(text.count)),
                                (Array(gz.dropLast(30)), nil), (Array(text), nil), ([], nil)] as [([UInt8], Int64?)] {
            #expect(throws: RESTError.self) { try GzipAttachment.decode(bytes[...], expectedLength: length, name: "n") }
        }
        // A bomb is stopped at its stated length, not inflated whole.
        let bomb = GzipAttachment.encode([UInt8](repeating: 0, count: 8 << 20))
        #expect(throws: RESTError.self) { try GzipAttachment.decode(bomb[...], expectedLength: 1000, name: "n") }
    }

    @Test func md5DigestAndStubShapeAreCouchDBs() {
        // CouchDB 3.5 answers `"digest":"md5-XUFAKrxLKna5cZ2REBfFkg=="` for an attachment "hello".
        #expect(AttachmentMD5.digest(Array("hello".utf8)) == "md5-XUFAKrxLKna5cZ2REBfFkg==")
        let stored: [String: JSONValue] = ["digest": "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=", "md5_digest": "md5-XUFAKrxLKna5cZ2REBfFkg==",
                                           "length": 5, "revpos": 1, "content_type": "text/plain"]
        #expect(AttachmentRendering.stub(stored) == ["digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "revpos": 1,
                                                     "content_type": "text/plain", "stub": true])
        var old = stored
        old["md5_digest"] = nil
        #expect(AttachmentRendering.stub(old)["digest"] == "sha1-qvTGHdzF6KLavt4PO0gs2a6pQ00=")
    }

    static func multipart(_ boundary: String, _ parts: [([String], [UInt8])]) -> [UInt8] {
        var w = MultipartWriter(boundary: boundary)
        for (headers, body) in parts {
            w.part(headers.map { h in
                let kv = h.split(separator: ":", maxSplits: 1)
                return (String(kv[0]), kv[1].trimmingCharacters(in: .whitespaces))
            }, body)
        }
        return w.finished()
    }

    @Test func replicatorRoutesCarryStubsGzipAndMultipart() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let text = Array(String(repeating: "note line\n", count: 145).utf8)  // 1450 bytes
        let gz = GzipAttachment.encode(text)
        let binary = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        // What CouchDB's replicator PUTs: a gzip part with Content-Encoding, named parts.
        let json = #"{"_id":"d","_rev":"1-aaaa","_revisions":{"start":1,"ids":["aaaa"]},"t":1,"_attachments":{"note.txt":{"content_type":"text/plain","revpos":1,"digest":"md5-ignored","length":\#(text.count),"follows":true,"encoding":"gzip","encoded_length":\#(gz.count)},"bin":{"content_type":"application/octet-stream","revpos":1,"length":3000,"follows":true}}}"#
        let body = Self.multipart("B", [(["Content-Type: application/json"], Array(json.utf8)),
                                        (["Content-Disposition: attachment; filename=\"note.txt\"", "Content-Type: text/plain",
                                          "Content-Encoding: gzip"], gz),
                                        (["Content-Disposition: attachment; filename=\"bin\""], binary)])
        let put = try await f.request("PUT", "/db/d?new_edits=false", body: body, headers: [("Content-Type", "multipart/related; boundary=\"B\"")])
        #expect(put.status == 201, "\(put.text)")
        #expect(try await f.request("GET", "/db/d/note.txt").body == text)
        // Served gzip-encoded to a client that takes gzip (as CouchDB serves what it stores
        // so), as it is to one that does not, or says q=0; a binary type never.
        let zipped = try await f.request("GET", "/db/d/note.txt", headers: [("Accept-Encoding", "deflate, gzip;q=0.5")])
        #expect(zipped.header("Content-Encoding") == "gzip")
        #expect(try GzipAttachment.decode(zipped.body[...], expectedLength: Int64(text.count), name: "note.txt") == text)
        let refusedGzip = try await f.request("GET", "/db/d/note.txt", headers: [("Accept-Encoding", "gzip;q=0")])
        #expect(refusedGzip.header("Content-Encoding") == nil && refusedGzip.body == text)
        let raw = try await f.request("GET", "/db/d/bin", headers: [("Accept-Encoding", "gzip")])
        #expect(raw.header("Content-Encoding") == nil && raw.body == binary)

        // Every read shows CouchDB's stubs.
        let doc = try await f.request("GET", "/db/d")
        let note = try #require(doc.object["_attachments"]?.objectValue?["note.txt"]?.objectValue)
        #expect(note["stub"] == true)
        #expect(note["length"] == .int(Int64(text.count)))
        #expect(note["digest"]?.stringValue == AttachmentMD5.digest(text))
        #expect(note["md5_digest"] == nil && note["encoding"] == nil)
        let bulk = try await f.request("POST", "/db/_bulk_get?revs=true", json: #"{"docs":[{"id":"d","rev":"1-aaaa"}]}"#)
        #expect(bulk.text.contains(#""stub":true"#))
        let changes = try await f.request("GET", "/db/_changes?include_docs=true")
        #expect(changes.text.contains(#""stub":true"#))
        let allDocs = try await f.request("GET", "/db/_all_docs?include_docs=true")
        #expect(allDocs.text.contains(#""stub":true"#))

        // A body-only edit pushed with stubs naming CouchDB's digest keeps the attachments.
        let edit = #"{"_id":"d","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"t":2,"_attachments":{"note.txt":{"stub":true,"revpos":1,"digest":"\#(AttachmentMD5.digest(text))","length":\#(text.count)},"bin":{"stub":true,"revpos":1}}}"#
        let pushed = try await f.request("POST", "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[\#(edit)]}"#)
        #expect(pushed.status == 201, "\(pushed.text)")
        #expect(try await f.request("GET", "/db/d/bin").body == binary)
        // A stub whose md5 is not the stored one is 412 missing_stub, as in CouchDB.
        let wrong = try await f.request("PUT", "/db/d?rev=2-bbbb", json: #"{"_attachments":{"note.txt":{"stub":true,"digest":"md5-AAAAAAAAAAAAAAAAAAAAAA=="}}}"#)
        #expect(wrong.status == 412, "\(wrong.text)")

        // open_revs with Accept: multipart/mixed, atts_since the revision that has them: stubs only.
        let since = try await f.request("GET", "/db/d?open_revs=%5B%222-bbbb%22,%223-cccc%22%5D&revs=true&latest=true&atts_since=%5B%221-aaaa%22%5D",
                                        headers: [("Accept", "multipart/mixed")])
        #expect(since.status == 200)
        let mixedType = try #require(since.header("Content-Type"))
        #expect(mixedType.hasPrefix("multipart/mixed"))
        let mixed = try MultipartRelated(contentType: mixedType, body: since.body)
        #expect(mixed.parts.count == 2)
        #expect(mixed.parts[0].header("content-type") == "application/json")
        #expect(String(decoding: mixed.parts[0].body, as: UTF8.self).contains(#""stub":true"#))
        #expect(mixed.parts[1].header("content-type") == #"application/json; error="true""#)
        #expect(Array(mixed.parts[1].body) == Array(#"{"missing":"3-cccc"}"#.utf8))

        // Without atts_since (or with an unrelated revision) the attachments follow, nested.
        let all = try await f.request("GET", "/db/d?open_revs=all&revs=true&attachments=true&atts_since=%5B%221-ffff%22%5D",
                                      headers: [("Accept", "multipart/mixed")])
        let outer = try MultipartRelated(contentType: try #require(all.header("Content-Type")), body: all.body)
        #expect(outer.parts.count == 1)
        let relatedType = try #require(outer.parts[0].header("content-type"))
        #expect(relatedType.hasPrefix("multipart/related"))
        let related = try MultipartRelated(contentType: relatedType, body: Array(outer.parts[0].body))
        #expect(related.parts.count == 3)
        let first = try JSONParser.parseObject(Array(related.parts[0].body), sizeLimit: 1 << 20)
        #expect(first["_attachments"]?.objectValue?["bin"]?.objectValue?["follows"] == true)
        #expect(first["_revisions"]?.objectValue?["start"] == 2)
        // Parts follow the JSON's entry order: "bin" before "note.txt".
        #expect(Array(related.parts[1].body) == binary)
        #expect(Array(related.parts[2].body) == text)
        #expect(related.parts[2].filename == "note.txt")

        // GET with Accept: multipart/related answers the document with its attachments.
        let rel = try await f.request("GET", "/db/d?attachments=true", headers: [("Accept", "multipart/related")])
        let relParts = try MultipartRelated(contentType: try #require(rel.header("Content-Type")), body: rel.body)
        #expect(relParts.parts.count == 3)
        // JSON with attachments=true: base64 data of the decoded bytes.
        let inline = try await f.request("GET", "/db/d?attachments=true")
        #expect(inline.object["_attachments"]?.objectValue?["note.txt"]?.objectValue?["data"]?.stringValue == Data(text).base64EncodedString())

        // An attachment stored with revpos 0 (CouchDB keeps one written inline with
        // new_edits:false so) carries its bytes when no atts_since is asked — CouchDB's
        // replicator then expects them and fails the job on a stub (missing_stub) — and is a
        // stub under any atts_since, as CouchDB renders it.
        let zero = #"{"_id":"z","_rev":"2-abcd","_revisions":{"start":2,"ids":["abcd","0123"]},"_attachments":{"b.txt":{"content_type":"text/plain","revpos":0,"data":"\#(Data("zero".utf8).base64EncodedString())"}}}"#
        #expect(try await f.request("POST", "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[\#(zero)]}"#).status == 201)
        let zeroAll = try await f.request("GET", "/db/z?open_revs=all&revs=true&latest=true", headers: [("Accept", "multipart/mixed")])
        let zeroOuter = try MultipartRelated(contentType: try #require(zeroAll.header("Content-Type")), body: zeroAll.body)
        #expect(zeroOuter.parts.first?.header("content-type")?.hasPrefix("multipart/related") == true, "\(zeroAll.text)")
        let zeroSince = try await f.request("GET", "/db/z?open_revs=all&revs=true&atts_since=%5B%221-0123%22%5D")
        #expect(zeroSince.text.contains(#""stub":true"#), "\(zeroSince.text)")

        // Gzip that does not decode to the stated length is refused, nothing stored.
        let lying = #"{"_attachments":{"x":{"follows":true,"encoding":"gzip","length":5}}}"#
        let badBody = Self.multipart("B", [([], Array(lying.utf8)), (["Content-Encoding: gzip"], gz)])
        let refused = try await f.request("PUT", "/db/lying", body: badBody, headers: [("Content-Type", "multipart/related; boundary=B")])
        #expect(refused.status == 400, "\(refused.text)")
        #expect(try await f.request("GET", "/db/lying").status == 404)
    }
}
