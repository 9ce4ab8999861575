import FerryServer
import FerryStore
import FerryTestSupport
import Testing

@Suite("REST API: documents, bulk, all_docs, changes, local")
struct RESTCoreTests {
    @Test func documentLifecycleWithRevisionsAndETags() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let created = try await f.request("PUT", "/db/doc1", json: #"{"a":1}"#)
        #expect(created.status == 201)
        let rev1 = try #require(created.object["rev"]?.stringValue)
        #expect(created.header("ETag") == "\"\(rev1)\"")
        let read = try await f.request("GET", "/db/doc1")
        #expect(read.status == 200)
        #expect(read.object["_rev"]?.stringValue == rev1)
        #expect(read.object["a"]?.intValue == 1)
        #expect(try await f.request("GET", "/db/doc1", headers: [("If-None-Match", "\"\(rev1)\"")]).status == 304)
        // No revision named over an existing document: conflict, nothing written.
        let stale = try await f.request("PUT", "/db/doc1", json: #"{"a":2}"#)
        #expect(stale.status == 409)
        #expect(stale.object["error"]?.stringValue == "conflict")
        let updated = try await f.request("PUT", "/db/doc1", json: #"{"a":2}"#, headers: [("If-Match", "\"\(rev1)\"")])
        #expect(updated.status == 201)
        let rev2 = try #require(updated.object["rev"]?.stringValue)
        let history = try await f.request("GET", "/db/doc1?revs=true")
        #expect(history.object["_revisions"]?.objectValue?["start"]?.intValue == 2)
        #expect(try await f.request("DELETE", "/db/doc1?rev=\(rev1)").status == 409)
        #expect(try await f.request("DELETE", "/db/doc1?rev=\(rev2)").status == 200)
        let gone = try await f.request("GET", "/db/doc1")
        #expect(gone.status == 404)
        #expect(gone.object["reason"]?.stringValue == "deleted")
    }

    @Test func bulkDocsAllDocsAndChanges() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let docs = (0..<10).map { #"{"_id":"d\#($0)","n":\#($0)}"# }.joined(separator: ",")
        let bulk = try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[\#(docs)]}"#)
        #expect(bulk.status == 201)
        #expect(bulk.json?.arrayValue?.count == 10)
        let page = try await f.request("GET", "/db/_all_docs?startkey=%22d2%22&endkey=%22d5%22&include_docs=true&skip=1&limit=2")
        let rows = page.object["rows"]?.arrayValue ?? []
        #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue } == ["d3", "d4"])
        #expect(rows.first?.objectValue?["doc"]?.objectValue?["n"]?.intValue == 3)
        let down = try await f.request("GET", "/db/_all_docs?descending=true&limit=3")
        #expect(down.object["rows"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["d9", "d8", "d7"])
        let changes = try await f.request("GET", "/db/_changes?since=5&limit=3")
        #expect(changes.object["results"]?.arrayValue?.count == 3)
        #expect(changes.object["last_seq"]?.stringValue == "8")
        #expect(changes.object["pending"]?.intValue == 2)
        // new_edits=false: a replicated revision with its history; errors only in the answer.
        let replicated = try await f.request("POST", "/db/_bulk_docs", json: #"{"new_edits":false,"docs":[{"_id":"r","_rev":"3-cc","_revisions":{"start":3,"ids":["cc","bb","aa"]},"x":1}]}"#)
        #expect(replicated.status == 201)
        #expect(replicated.json?.arrayValue?.isEmpty == true)
        let revs = try await f.request("GET", "/db/r?revs=true")
        #expect(revs.object["_rev"]?.stringValue == "3-cc")
        #expect(revs.object["_revisions"]?.objectValue?["ids"]?.arrayValue?.count == 3)
    }

    @Test func conflictingReplicatedBranchesAreResolvedAsTheyAreStored() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        let branches = #"{"new_edits":false,"docs":[{"_id":"c","_rev":"2-aa","_revisions":{"start":2,"ids":["aa","00"]}},{"_id":"c","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","00"]}}]}"#
        #expect(try await f.request("POST", "/db/_bulk_docs", json: branches).status == 201)
        // Ferry's rule, the same on every peer: at equal depth the higher revision wins; the
        // loser stays, closed by a tombstone child — `style=all_docs` lists both leaves, and
        // both revisions written are still there (Protocol/revisions.md, "Storing a resolution").
        let doc = try await f.request("GET", "/db/c?conflicts=true")
        #expect(doc.object["_rev"]?.stringValue == "2-bb")
        #expect(doc.object["_conflicts"] == nil)
        let all = try await f.request("GET", "/db/_changes?style=all_docs")
        let revs = all.object["results"]?.arrayValue?.first?.objectValue?["changes"]?.arrayValue?.compactMap { $0.objectValue?["rev"]?.stringValue }
        #expect(revs?.count == 2 && revs?.first == "2-bb" && revs?.last?.hasPrefix("3-") == true, "\(String(describing: revs))")
        let diff = try await f.request("POST", "/db/_revs_diff", json: #"{"c":["2-aa","2-bb"]}"#)
        #expect(diff.json?.objectValue?.isEmpty == true, "nothing written was lost")
    }

    @Test func changesWithANamedFilterAndDocIDs() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        f.daemon.registerPullFilter("byType") { doc, _, params in doc["type"]?.stringValue == params["type"] }
        let docs = #"{"docs":[{"_id":"a","type":"task"},{"_id":"b","type":"note"},{"_id":"c","type":"task"}]}"#
        #expect(try await f.request("POST", "/db/_bulk_docs", json: docs).status == 201)
        func ids(_ r: HTTPTestResponse) -> [String] {
            r.object["results"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
        }
        #expect(ids(try await f.request("GET", "/db/_changes?filter=byType&type=task")) == ["a", "c"])
        #expect(ids(try await f.request("GET", "/db/_changes?filter=_doc_ids&doc_ids=%5B%22b%22%5D")) == ["b"])
        #expect(ids(try await f.request("POST", "/db/_changes?filter=_doc_ids", json: #"{"doc_ids":["c"]}"#)) == ["c"])
        #expect(try await f.request("GET", "/db/_changes?filter=nope").status == 400, "CouchDB's answer to an unknown filter")
    }

    @Test func longpollWakesOnAWrite() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"])
        defer { Task { await f.stop() } }
        _ = try await f.request("PUT", "/db/before", json: "{}")
        let since = try #require(try await f.request("GET", "/db").object["update_seq"]?.stringValue)
        // Parked until a write after `since` (whichever of the two requests the server sees
        // first, the answer is that write), well before its 30 s timeout.
        async let waiting = f.request("GET", "/db/_changes?feed=longpoll&since=\(since)&timeout=30000")
        _ = try await f.request("PUT", "/db/after", json: "{}")
        let rows = try await waiting.object["results"]?.arrayValue ?? []
        #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue } == ["after"])
    }

    @Test func errorsHaveCouchDBShapeAndStatus() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, anonymousRole: .admin, databases: ["db"])
        defer { Task { await f.stop() } }
        let missingDB = try await f.request("GET", "/nope/x")
        #expect(missingDB.status == 404)
        #expect(missingDB.object["error"]?.stringValue == "not_found")
        #expect(try await f.request("PUT", "/Bad-Name").status == 400)
        #expect(try await f.request("PUT", "/db").status == 412)
        #expect(try await f.request("PUT", "/db/x", json: "[1]").status == 400)
        #expect(try await f.request("POST", "/db/_bulk_docs", body: Array("{}".utf8), headers: [("Content-Type", "text/plain")]).status == 415)
        #expect(try await f.request("PATCH", "/db/x", json: "{}").status == 405)
        // A write to an ID CouchDB reserves is its `illegal_docid`; a read of one is 404.
        #expect(try await f.request("PUT", "/db/_weird", json: "{}").object["error"]?.stringValue == "illegal_docid")
        #expect(try await f.request("GET", "/db/_weird").status == 404)
        #expect(try await f.request("PUT", "/db/x", json: #"{"_bad":1}"#).status == 400)
        // A history whose generations would count below 1 (or overflow) is not one.
        for start in ["-9223372036854775808", "1", "-1"] {
            let bad = #"{"_rev":"2-bb","_revisions":{"start":\#(start),"ids":["bb","aa"]}}"#
            let r = try await f.request("PUT", "/db/h?new_edits=false", json: bad)
            #expect(r.status == 400)
            #expect(r.object["reason"]?.stringValue?.hasPrefix("_revisions") == true)
        }
        #expect(try await f.request("PUT", "/db/h?new_edits=false", json: #"{"_rev":"2-bb","_revisions":{"start":2,"ids":["bb","aa"]}}"#).status == 201)
        #expect(try await f.request("GET", "/").status == 200)
    }
}
