import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

@Suite("REST API: attachments, replication endpoints, purge, compact, find")
struct RESTExtendedTests {
    static let users = [
        DaemonFixture.user("ada", "a", ["db": .admin]),
        DaemonFixture.user("wes", "w", ["db": .writer]),
        DaemonFixture.user("rey", "r", ["db": .reader]),
    ]

    @Test func attachmentPutGetRangesAndDelete() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let text = Array("hello world".utf8)
        // A new document needs no revision.
        let put = try await f.request("PUT", "/db/a/note.txt", body: text, headers: [("Content-Type", "text/plain")])
        #expect(put.status == 201)
        let rev1 = try #require(put.object["rev"]?.stringValue)
        #expect(put.object["id"]?.stringValue == "a")
        let get = try await f.request("GET", "/db/a/note.txt")
        #expect(get.status == 200)
        #expect(get.body == text)
        #expect(get.header("Content-Type") == "text/plain")
        #expect(get.header("Accept-Ranges") == "bytes")
        let etag = "\"\(BlobDigest(of: text))\""
        #expect(get.header("ETag") == etag)
        #expect(try await f.request("GET", "/db/a/note.txt", headers: [("If-None-Match", etag)]).status == 304)
        let head = try await f.request("HEAD", "/db/a/note.txt")
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "11")

        for (range, part, contentRange) in [("bytes=0-4", "hello", "bytes 0-4/11"), ("bytes=6-", "world", "bytes 6-10/11"),
                                            ("bytes=-5", "world", "bytes 6-10/11"), ("bytes=6-99", "world", "bytes 6-10/11")] {
            let r = try await f.request("GET", "/db/a/note.txt", headers: [("Range", range)])
            #expect(r.status == 206, "\(range)")
            #expect(r.text == part, "\(range)")
            #expect(r.header("Content-Range") == contentRange, "\(range)")
        }
        let outside = try await f.request("GET", "/db/a/note.txt", headers: [("Range", "bytes=11-20")])
        #expect(outside.status == 416)
        #expect(outside.header("Content-Range") == "bytes */11")
        #expect(outside.object["error"]?.stringValue == "requested_range_not_satisfiable")
        let several = try await f.request("GET", "/db/a/note.txt", headers: [("Range", "bytes=0-1,3-4")])
        #expect(several.status == 206, "several ranges: multipart/byteranges, as CouchDB")
        #expect(several.header("Content-Type")?.hasPrefix("multipart/byteranges") == true)

        // An existing document: a revision is needed, a stale one conflicts.
        #expect(try await f.request("PUT", "/db/a/two.bin", body: [1, 2, 3]).status == 409)
        let second = try await f.request("PUT", "/db/a/two.bin?rev=\(rev1)", body: [1, 2, 3], headers: [("Content-Type", "application/octet-stream")])
        #expect(second.status == 201)
        let rev2 = try #require(second.object["rev"]?.stringValue)
        #expect(try await f.request("PUT", "/db/a/three.bin?rev=\(rev1)", body: [4]).status == 409)
        #expect(try await f.request("PUT", "/db/a/_hidden", headers: [("If-Match", "\"\(rev2)\"")]).status == 400)
        let doc = try await f.request("GET", "/db/a")
        let atts = try #require(doc.object["_attachments"]?.objectValue)
        #expect(atts.keys.sorted() == ["note.txt", "two.bin"])
        #expect(atts["note.txt"]?.objectValue?["revpos"]?.intValue == 1)
        #expect(atts["two.bin"]?.objectValue?["revpos"]?.intValue == 2)
        #expect(atts["two.bin"]?.objectValue?["length"]?.intValue == 3)

        #expect(try await f.request("DELETE", "/db/a/note.txt").status == 409)
        #expect(try await f.request("DELETE", "/db/a/nothing?rev=\(rev2)").status == 404)
        let removed = try await f.request("DELETE", "/db/a/note.txt", headers: [("If-Match", "\"\(rev2)\"")])
        #expect(removed.status == 200)
        #expect(removed.object["rev"]?.stringValue?.hasPrefix("3-") == true)
        #expect(try await f.request("GET", "/db/a/note.txt").status == 404)
        #expect(try await f.request("GET", "/db/a/two.bin").body == [1, 2, 3])
        // An older revision is not kept once it has a child, so neither is its attachment list.
        #expect(try await f.request("GET", "/db/a/note.txt?rev=\(rev1)").status == 404)
        #expect(try await f.request("GET", "/db/missing/x.txt").status == 404)
    }

    @Test func aLargeAttachmentIsStreamedWholeAndInRanges() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        // Over the 4 MiB answered from memory: streamed in chunks, and a range of it too.
        let big = (0..<(5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        #expect(try await f.request("PUT", "/db/big/blob", body: big).status == 201)
        let whole = try await f.request("GET", "/db/big/blob")
        #expect(whole.status == 200)
        #expect(whole.header("Transfer-Encoding") == "chunked")
        #expect(whole.body == big)
        let lo = 100_001, hi = (5 << 20) - 3
        let part = try await f.request("GET", "/db/big/blob", headers: [("Range", "bytes=\(lo)-\(hi)")])
        #expect(part.status == 206)
        #expect(part.header("Content-Range") == "bytes \(lo)-\(hi)/\(5 << 20)")
        #expect(part.body == Array(big[lo...hi]))
        let head = try await f.request("HEAD", "/db/big/blob")
        #expect(head.header("Content-Length") == "\(5 << 20)")
    }

    @Test func inlineAttachmentsStubsAndAttachmentsTrue() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let data = Data("inline bytes".utf8).base64EncodedString()
        let put = try await f.request("PUT", "/db/d", json: #"{"n":1,"_attachments":{"a.txt":{"content_type":"text/plain","data":"\#(data)"}}}"#)
        #expect(put.status == 201)
        let rev1 = try #require(put.object["rev"]?.stringValue)
        let att = try await f.request("GET", "/db/d/a.txt")
        #expect(att.text == "inline bytes")
        #expect(att.header("Content-Type") == "text/plain")
        let plain = try await f.request("GET", "/db/d")
        #expect(plain.object["_attachments"]?.objectValue?["a.txt"]?.objectValue?["data"] == nil)
        let inlined = try await f.request("GET", "/db/d?attachments=true")
        let meta = inlined.object["_attachments"]?.objectValue?["a.txt"]?.objectValue
        #expect(meta?["data"]?.stringValue == data)
        #expect(meta?["length"] == nil, "inline data without length, as CouchDB")
        #expect(meta?["stub"] == nil)
        let openRevs = try await f.request("GET", "/db/d?open_revs=all&attachments=true")
        #expect(openRevs.json?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_attachments"]?.objectValue?["a.txt"]?.objectValue?["data"]?.stringValue == data)

        // A stub with no digest keeps the parent's attachment; an unknown one is 412.
        let kept = try await f.request("PUT", "/db/d", json: #"{"_rev":"\#(rev1)","n":2,"_attachments":{"a.txt":{"stub":true}}}"#)
        #expect(kept.status == 201)
        let rev2 = try #require(kept.object["rev"]?.stringValue)
        #expect(try await f.request("GET", "/db/d/a.txt").text == "inline bytes")
        let stray = try await f.request("PUT", "/db/d", json: #"{"_rev":"\#(rev2)","_attachments":{"b.txt":{"stub":true}}}"#)
        #expect(stray.status == 412)
        #expect(stray.object["error"]?.stringValue == "missing_stub")
        #expect(try await f.request("PUT", "/db/d", json: #"{"_rev":"\#(rev2)","_attachments":{"c":{"data":"%%%"}}}"#).status == 400)

        // POST /db and _bulk_docs take inline data too.
        let posted = try await f.request("POST", "/db", json: #"{"_id":"p","_attachments":{"p.txt":{"data":"\#(Data("posted".utf8).base64EncodedString())"}}}"#)
        #expect(posted.status == 201)
        #expect(try await f.request("GET", "/db/p/p.txt").text == "posted")
        let bulk = try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[{"_id":"b1","_attachments":{"x":{"content_type":"text/csv","data":"\#(Data("1,2".utf8).base64EncodedString())"}}}]}"#)
        #expect(bulk.status == 201)
        let b1 = try await f.request("GET", "/db/b1/x")
        #expect(b1.text == "1,2")
        #expect(b1.header("Content-Type") == "text/csv")
    }

    static func multipart(_ boundary: String, _ parts: [(headers: [String], body: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        for p in parts {
            out += Array("--\(boundary)\r\n".utf8)
            for h in p.headers { out += Array("\(h)\r\n".utf8) }
            out += Array("\r\n".utf8)
            out += p.body
            out += Array("\r\n".utf8)
        }
        out += Array("--\(boundary)--\r\n".utf8)
        return out
    }

    @Test func multipartRelatedUploadAndBadBodies() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let json = #"{"title":"with files","_attachments":{"z.txt":{"follows":true,"content_type":"text/plain","length":5},"a.bin":{"follows":true,"content_type":"application/octet-stream"}}}"#
        let binary: [UInt8] = [0, 13, 10, 45, 45, 255, 1]  // CR LF and dashes inside a part are data
        let body = Self.multipart("xYz", [(["Content-Type: application/json"], Array(json.utf8)), ([], Array("first".utf8)), ([], binary)])
        let put = try await f.request("PUT", "/db/m", body: body, headers: [("Content-Type", #"multipart/related; boundary="xYz""#)])
        #expect(put.status == 201, "\(put.text)")
        // Parts pair with the follows entries in the order the JSON lists them.
        #expect(try await f.request("GET", "/db/m/z.txt").text == "first")
        #expect(try await f.request("GET", "/db/m/a.bin").body == binary)
        #expect(try await f.request("GET", "/db/m").object["title"]?.stringValue == "with files")

        // Named parts (CouchDB's replicator) pair by name, whatever their order; new_edits=false.
        let named = #"{"_id":"n","_rev":"1-abcd","_attachments":{"one":{"follows":true},"two":{"follows":true}}}"#
        let namedBody = Self.multipart("b", [([], Array(named.utf8)),
                                             (["Content-Disposition: attachment; filename=\"two\""], Array("2".utf8)),
                                             (["Content-Disposition: attachment; filename=\"one\""], Array("1".utf8))])
        let replicated = try await f.request("PUT", "/db/n?new_edits=false", body: namedBody, headers: [("Content-Type", "multipart/related;boundary=b")])
        #expect(replicated.status == 201, "\(replicated.text)")
        #expect(try await f.request("GET", "/db/n/one").text == "1")
        #expect(try await f.request("GET", "/db/n/two").text == "2")

        let doc = Array(#"{"_attachments":{"a":{"follows":true}}}"#.utf8)
        let bad: [(String, [UInt8])] = [
            ("multipart/related", Self.multipart("q", [([], doc), ([], [1])])),                        // no boundary
            ("multipart/related; boundary=q", Array(Self.multipart("q", [([], doc), ([], [1])]).dropLast(8))),  // unterminated
            ("multipart/related; boundary=q", Self.multipart("q", [([], doc)])),                          // a part missing
            ("multipart/related; boundary=q", Self.multipart("q", [([], doc), ([], [1]), ([], [2])])),    // a part too many
            ("multipart/related; boundary=q", Self.multipart("q", [([], Array("{not json".utf8)), ([], [1])])),
            ("multipart/related; boundary=q", Self.multipart("q", [(["no colon here"], doc), ([], [1])])),
            ("multipart/related; boundary=q", Array("--q\r\nContent-Type: application/json".utf8)),     // no blank line, no end
            ("multipart/related; boundary=q", Array("garbage".utf8)),
            ("multipart/related; boundary=q", []),
            ("multipart/related; boundary=" + String(repeating: "x", count: 71), Array("--".utf8)),
            ("multipart/related; boundary=q", Self.multipart("q", [([], Array(#"{"_attachments":{"a":{"follows":true,"length":9}}}"#.utf8)), ([], [1])])),
        ]
        for (i, (type, bytes)) in bad.enumerated() {
            let r = try await f.request("PUT", "/db/bad\(i)", body: bytes, headers: [("Content-Type", type)])
            #expect(r.status == 400, "case \(i): \(r.status) \(r.text)")
            #expect(r.object["error"]?.stringValue == "bad_request", "case \(i)")
        }
        #expect(try await f.request("GET", "/db/bad0").status == 404)
        #expect(try await f.request("GET", "/").status == 200)
    }

    @Test func revsDiffBulkGetAndRevsLimitOnADocumentWithTwoRevisions() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let rev1 = try #require(try await f.request("PUT", "/db/d", json: #"{"v":1}"#).object["rev"]?.stringValue)
        let rev2 = try #require(try await f.request("PUT", "/db/d?rev=\(rev1)", json: #"{"v":2}"#).object["rev"]?.stringValue)
        _ = try await f.request("PUT", "/db/e", json: #"{"v":1}"#)
        let absent = "3-" + String(repeating: "a", count: 40)
        let diff = try await f.request("POST", "/db/_revs_diff", json: #"{"d":["\#(rev1)","\#(rev2)","\#(absent)"],"e":[],"x":["1-00"]}"#)
        #expect(diff.status == 200)
        let d = diff.object["d"]?.objectValue
        #expect(d?["missing"]?.arrayValue == [.string(absent)])
        #expect(d?["possible_ancestors"]?.arrayValue == [.string(rev2)])
        #expect(diff.object["e"] == nil)
        #expect(diff.object["x"]?.objectValue?["missing"]?.arrayValue == ["1-00"])
        #expect(diff.object["x"]?.objectValue?["possible_ancestors"] == nil)
        #expect(try await f.request("POST", "/db/_revs_diff", json: #"{"d":"1-a"}"#).status == 400)
        #expect(try await f.request("GET", "/db/_revs_diff").status == 405)

        let get = try await f.request("POST", "/db/_bulk_get?revs=true", json: #"{"docs":[{"id":"d","rev":"\#(rev2)"},{"id":"d","rev":"\#(rev1)"},{"id":"d"},{"id":"nope"},{"rev":"1-a"}]}"#)
        #expect(get.status == 200)
        let results = try #require(get.object["results"]?.arrayValue)
        #expect(results.count == 5)
        let first = results[0].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue
        #expect(first?["_rev"]?.stringValue == rev2)
        #expect(first?["v"]?.intValue == 2)
        #expect(first?["_revisions"]?.objectValue?["ids"]?.arrayValue?.count == 2)
        // The first revision's body is gone once it has a child: an error for that item only.
        let old = results[1].objectValue?["docs"]?.arrayValue?.first?.objectValue?["error"]?.objectValue
        #expect(old?["error"]?.stringValue == "not_found")
        #expect(old?["rev"]?.stringValue == rev1)
        #expect(results[2].objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_rev"]?.stringValue == rev2)
        #expect(results[3].objectValue?["docs"]?.arrayValue?.first?.objectValue?["error"]?.objectValue?["id"]?.stringValue == "nope")
        #expect(results[4].objectValue?["docs"]?.arrayValue?.first?.objectValue?["error"]?.objectValue?["error"]?.stringValue == "bad_request")
        // latest=true: an inner revision is answered with the leaf that descends from it.
        let latest = try await f.request("POST", "/db/_bulk_get?latest=true", json: #"{"docs":[{"id":"d","rev":"\#(rev1)"}]}"#)
        #expect(latest.object["results"]?.arrayValue?.first?.objectValue?["docs"]?.arrayValue?.first?.objectValue?["ok"]?.objectValue?["_rev"]?.stringValue == rev2)
        #expect(try await f.request("POST", "/db/_bulk_get", json: #"{"ids":[]}"#).status == 400)

        let limit = try await f.request("GET", "/db/_revs_limit")
        #expect(limit.status == 200)
        #expect(limit.json == .int(50))
        #expect(try await f.request("PUT", "/db/_revs_limit", json: "50").status == 403)  // writer
        let admin = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin, databases: ["db"])
        defer { Task { await admin.stop() } }
        #expect(try await admin.request("PUT", "/db/_revs_limit", json: "50").status == 200)
        #expect(try await admin.request("PUT", "/db/_revs_limit", json: "10").status == 400)
        #expect(try await admin.request("PUT", "/db/_revs_limit", json: "ten").status == 400)
    }

    @Test func purgeCompactAndEnsureFullCommit() async throws {
        let f = try await DaemonFixture(users: Self.users, databases: ["db"])
        defer { Task { await f.stop() } }
        let wes = ("wes", "w")
        let rev1 = try #require(try await f.request("PUT", "/db/d", json: #"{"v":1}"#, user: wes).object["rev"]?.stringValue)
        let rev2 = try #require(try await f.request("PUT", "/db/d?rev=\(rev1)", json: #"{"v":2}"#, user: wes).object["rev"]?.stringValue)
        #expect(try await f.request("POST", "/db/_purge", json: #"{"d":["\#(rev2)"]}"#, user: ("rey", "r")).status == 403)
        // Naming a revision that is not a leaf purges nothing.
        let partial = try await f.request("POST", "/db/_purge", json: #"{"d":["\#(rev1)"],"ghost":["1-ab"]}"#, user: wes)
        #expect(partial.status == 201)
        #expect(partial.object["purged"]?.objectValue == ["d": [], "ghost": []], "every named document listed, as CouchDB")
        #expect(partial.object["purge_seq"] == .null)
        #expect(try await f.request("GET", "/db/d", user: wes).status == 200)
        let purged = try await f.request("POST", "/db/_purge", json: #"{"d":["\#(rev1)","\#(rev2)"]}"#, user: wes)
        #expect(purged.status == 201)
        #expect(purged.object["purged"]?.objectValue?["d"]?.arrayValue == [.string(rev2)], "only the purged leaf, as CouchDB")
        let gone = try await f.request("GET", "/db/d", user: wes)
        #expect(gone.status == 404)
        #expect(gone.object["reason"]?.stringValue == "missing")
        #expect(try await f.request("POST", "/db/_purge", json: #"{"d":"x"}"#, user: wes).status == 400)

        // Compaction is for admins; it drops the blob no revision references any more.
        let a = try await f.request("PUT", "/db/att/x.bin", body: [9, 9, 9], user: wes)
        let arev = try #require(a.object["rev"]?.stringValue)
        #expect(try await f.request("DELETE", "/db/att/x.bin?rev=\(arev)", user: wes).status == 200)
        #expect(try await f.request("POST", "/db/_compact", json: "{}", user: wes).status == 403)
        let compacted = try await f.request("POST", "/db/_compact", json: "{}", user: ("ada", "a"))
        #expect(compacted.status == 202)
        #expect(compacted.object["ok"] == true)
        #expect(try await f.request("GET", "/db/_compact", user: ("ada", "a")).status == 405)
        let commit = try await f.request("POST", "/db/_ensure_full_commit", json: "{}", user: wes)
        #expect(commit.status == 201)
        #expect(commit.object["instance_start_time"]?.stringValue == "0")
        #expect(try await f.request("POST", "/db/_no_such_route", json: "{}", user: wes).status == 404)
    }

    @Test func findWithOperatorsPagingAndIndexes() async throws {
        // Anonymous requests are database admins here: an index is a design document.
        let f = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin, databases: ["db"])
        defer { Task { await f.stop() } }
        let docs = (0..<10).map { i in
            #"{"_id":"d\#(i)","n":\#(i),"type":"\#(i % 2 == 0 ? "even" : "odd")","address":{"city":"\#(i < 3 ? "Oslo" : "Rome")"}\#(i == 7 ? #","tag":null"# : "")}"#
        }.joined(separator: ",")
        #expect(try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[\#(docs)]}"#).status == 201)
        func ids(_ selector: String, extra: String = "") async throws -> [String] {
            let r = try await f.request("POST", "/db/_find", json: #"{"selector":\#(selector)\#(extra)}"#)
            #expect(r.status == 200, "\(selector): \(r.text)")
            return r.object["docs"]?.arrayValue?.compactMap { $0.objectValue?["_id"]?.stringValue } ?? []
        }
        #expect(try await ids(#"{"n":{"$gt":3,"$lte":6}}"#) == ["d4", "d5", "d6"])
        #expect(try await ids(#"{"type":"odd","n":{"$lt":5}}"#) == ["d1", "d3"])
        #expect(try await ids(#"{"type":{"$eq":"even"}}"#, extra: #","limit":2,"skip":1"#) == ["d2", "d4"])
        #expect(try await ids(#"{"$or":[{"n":1},{"n":{"$gte":8}}]}"#) == ["d1", "d8", "d9"])
        #expect(try await ids(#"{"$and":[{"n":{"$in":[2,4,6]}},{"n":{"$ne":4}}]}"#) == ["d2", "d6"])
        #expect(try await ids(#"{"address.city":"Oslo"}"#) == ["d0", "d1", "d2"])
        #expect(try await ids(#"{"address":{"city":"Oslo"}}"#) == ["d0", "d1", "d2"])
        #expect(try await ids(#"{"tag":{"$exists":true}}"#) == ["d7"])
        #expect(try await ids(#"{"tag":null}"#) == ["d7"])
        #expect(try await ids(#"{"_id":{"$gt":"d6"}}"#) == ["d7", "d8", "d9"])
        #expect(try await ids(#"{"_id":{"$gt":null}}"#).count == 10)
        #expect(try await ids(#"{"_id":{"$gte":"d2"}}"#, extra: #","sort":[{"_id":"desc"}],"limit":3"#) == ["d9", "d8", "d7"])
        #expect(try await ids(#"{"n":{"$regex":"^1"}}"#).isEmpty)  // $regex matches strings only
        #expect(try await ids(#"{"$nor":[{"n":{"$lt":8}}]}"#) == ["d8", "d9"])

        // fields, and a bookmark that continues where the page ended.
        let page = try await f.request("POST", "/db/_find", json: #"{"selector":{"n":{"$gte":0}},"limit":4,"fields":["_id","address.city"]}"#)
        let rows = page.object["docs"]?.arrayValue ?? []
        #expect(rows.first == .object(["_id": "d0", "address": .object(["city": "Oslo"])]))
        let bookmark = try #require(page.object["bookmark"]?.stringValue)
        #expect(page.object["warning"] != nil)  // no index on n yet
        #expect(try await ids(#"{"n":{"$gte":0}}"#, extra: #","limit":4,"bookmark":"\#(bookmark)""#) == ["d4", "d5", "d6", "d7"])

        // What CouchDB refuses is 400 with its error name and a reason that names the fault.
        for (body, error, needle) in [(#"{"selector":{"n":{"$bogus":1}}}"#, "invalid_operator", "$bogus"),
                                      (#"{"selector":{"n":{"$in":1}}}"#, "bad_arg", "$in"),
                                      (#"{"selector":{"n":1},"sort":[{"n":"desc"}]}"#, "no_usable_index", "sort"),
                                      (#"{"selector":{"n":{"$gte":0}},"sort":["_id"]}"#, "no_usable_index", "sort"),
                                      (#"{"limit":1}"#, "missing_required_key", "selector"),
                                      (#"{"selector":{"n":1},"bogus":1}"#, "invalid_key", "bogus")] {
            let r = try await f.request("POST", "/db/_find", json: body)
            #expect(r.status == 400, "\(body)")
            #expect(r.object["error"]?.stringValue == error, "\(body): \(r.text)")
            #expect(r.object["reason"]?.stringValue?.contains(needle) == true, "\(body): \(r.text)")
        }

        let index = try await f.request("POST", "/db/_index", json: #"{"index":{"fields":["n"]},"name":"by-n"}"#)
        #expect(index.status == 200)
        #expect(index.object["result"]?.stringValue == "created")
        let indexed = try await f.request("POST", "/db/_find", json: #"{"selector":{"n":{"$gt":7}}}"#)
        #expect(indexed.object["warning"] == nil)
        #expect(indexed.object["docs"]?.arrayValue?.count == 2)
        #expect(try await f.request("POST", "/db/_index", json: #"{"index":{}}"#).status == 400)
        // Sorted by the index, descending; listed, explained and deleted.
        #expect(try await ids(#"{"n":{"$gt":5}}"#, extra: #","sort":[{"n":"desc"}]"#) == ["d9", "d8", "d7", "d6"])
        let listed = try await f.request("GET", "/db/_index")
        #expect(listed.object["total_rows"] == 2)
        let explained = try await f.request("POST", "/db/_explain", json: #"{"selector":{"n":{"$gt":5}}}"#)
        #expect(explained.object["index"]?.objectValue?["name"] == "by-n")
        let ddoc = try #require(index.object["id"]?.stringValue)
        #expect(try await f.request("DELETE", "/db/_index/\(ddoc)/json/by-n").status == 200)
        #expect(try await f.request("GET", "/db/_index").object["total_rows"] == 1)
    }

    @Test func readersReadButDoNotWrite() async throws {
        let f = try await DaemonFixture(users: Self.users, databases: ["db"])
        defer { Task { await f.stop() } }
        #expect(try await f.request("PUT", "/db/a/x.txt", body: Array("x".utf8), user: ("wes", "w")).status == 201)
        let rey = ("rey", "r")
        #expect(try await f.request("GET", "/db/a/x.txt", user: rey).text == "x")
        #expect(try await f.request("PUT", "/db/b/x.txt", body: [1], user: rey).status == 403)
        #expect(try await f.request("POST", "/db/_find", json: #"{"selector":{}}"#, user: rey).object["docs"]?.arrayValue?.count == 1)
        #expect(try await f.request("POST", "/db/_bulk_get", json: #"{"docs":[{"id":"a"}]}"#, user: rey).status == 200)
        #expect(try await f.request("POST", "/db/_revs_diff", json: #"{"a":["9-a"]}"#, user: rey).status == 200)
        #expect(try await f.request("POST", "/db/_index", json: #"{"index":{"fields":["n"]}}"#, user: rey).status == 403)
        #expect(try await f.request("POST", "/db/_find", json: #"{"selector":{}}"#).status == 401)
    }
}
