import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// Documents and `_all_docs` answered as CouchDB 3.5 answers them (the differential harness's
/// findings, Tests/REST/differential): metadata options and their ETag rule, deleting a losing
/// conflict leaf, `open_revs=all` and `_bulk_get` of every leaf, `batch=ok`, DELETE's 404s,
/// `_design%2F` redirects, `_all_docs` parameter checks.
@Suite("REST documents in CouchDB's shapes")
struct CouchDBDocumentShapeTests {
    static let users = [DaemonFixture.user("ada", "a", ["db": .admin])]
    static let ada = ("ada", "a")
    static let (h1, h2) = ("1-" + String(repeating: "a", count: 32), "1-" + String(repeating: "b", count: 32))

    /// A daemon whose `db` keeps conflicts (CouchDB's way) holding document `x` with two leaves.
    static func conflicted() async throws -> DaemonFixture {
        let f = try await DaemonFixture(users: users, databases: ["db"])
        try f.daemon.registry.database("db")?.setConflictPolicy(.keep)
        let body = #"{"new_edits":false,"docs":[{"_id":"x","_rev":"\#(h1)","v":1},{"_id":"x","_rev":"\#(h2)","v":2}]}"#
        #expect(try await f.request("POST", "/db/_bulk_docs", json: body, user: ada).status == 201)
        return f
    }

    @Test func metadataDropsTheETagAndALosingLeafCanBeDeleted() async throws {
        let f = try await Self.conflicted()
        defer { Task { await f.stop() } }
        let meta = try await f.request("GET", "/db/x?meta=true", user: Self.ada)
        #expect(meta.object["_conflicts"] == .array([.string(Self.h1)]))
        #expect(meta.object["_revs_info"]?.arrayValue?.count == 1)
        #expect(meta.header("ETag") == nil)
        #expect(try await f.request("GET", "/db/x", user: Self.ada).header("ETag") == "\"\(Self.h2)\"")
        // open_revs=all: sorted by revision; _bulk_get without rev: every leaf.
        let all = try await f.request("GET", "/db/x?open_revs=all", user: Self.ada)
        #expect(all.json?.arrayValue?.compactMap { $0.objectValue?["ok"]?.objectValue?["_rev"]?.stringValue } == [Self.h1, Self.h2])
        let bulk = try await f.request("POST", "/db/_bulk_get", json: #"{"docs":[{"id":"x"},{}]}"#, user: Self.ada)
        let results = bulk.object["results"]?.arrayValue
        #expect(results?.first?.objectValue?["docs"]?.arrayValue?.count == 2)
        #expect(results?.last?.objectValue?["id"] == .null)

        let deleted = try await f.request("DELETE", "/db/x?rev=\(Self.h1)", user: Self.ada)
        #expect(deleted.status == 200)
        let tombstone = try #require(deleted.object["rev"]?.stringValue)
        #expect(tombstone.hasPrefix("2-"))
        let after = try await f.request("GET", "/db/x?deleted_conflicts=true&conflicts=true", user: Self.ada)
        #expect(after.object["_deleted_conflicts"] == .array([.string(tombstone)]))
        #expect(after.object["_conflicts"] == nil)
        #expect(after.object["_rev"]?.stringValue == Self.h2)
    }

    @Test func revisionsBatchAndDeletionAnswerAsCouchDB() async throws {
        let f = try await DaemonFixture(users: Self.users, databases: ["db"])
        defer { Task { await f.stop() } }
        let put = try await f.request("PUT", "/db/a", json: #"{"n":1}"#, user: Self.ada)
        #expect(put.header("Location")?.hasPrefix("http://127.0.0.1:") == true)
        let rev1 = try #require(put.object["rev"]?.stringValue)
        let rev2 = try #require(try await f.request("PUT", "/db/a?rev=\(rev1)", json: #"{"n":2}"#, user: Self.ada).object["rev"]?.stringValue)
        #expect(try await f.request("GET", "/db/a?rev=bogus", user: Self.ada).status == 400)
        let latest = try await f.request("GET", "/db/a?rev=\(rev1)&latest=true", user: Self.ada)
        #expect(latest.object["_rev"]?.stringValue == rev2)
        #expect(try await f.request("GET", "/db/a?local_seq=true", user: Self.ada).object["_local_seq"] == .int(2))
        // batch=ok: 202 without a revision; a conflict there is not told either.
        let batch = try await f.request("PUT", "/db/b?batch=ok", json: #"{"n":1}"#, user: Self.ada)
        #expect(batch.status == 202 && batch.object["rev"] == nil && batch.header("ETag") == nil)
        #expect(try await f.request("PUT", "/db/b?batch=ok", json: #"{"n":2}"#, user: Self.ada).status == 202)
        #expect(try await f.request("PUT", "/db/c", json: #"{"_foo":1}"#, user: Self.ada).object["error"] == "doc_validation")
        // `_deleted` by PUT is 200; the tombstone cannot be deleted again; nor can nothing.
        let gone = try await f.request("PUT", "/db/a", json: #"{"_rev":"\#(rev2)","_deleted":true}"#, user: Self.ada)
        #expect(gone.status == 200)
        let tombstone = try #require(gone.object["rev"]?.stringValue)
        #expect(try await f.request("DELETE", "/db/a?rev=\(tombstone)", user: Self.ada).status == 404)
        #expect(try await f.request("DELETE", "/db/nosuch?rev=1-abc", user: Self.ada).status == 404)
        #expect(try await f.request("POST", "/db/b", json: "{}", user: Self.ada).status == 400)
        #expect(try await f.request("PUT", "/db/_design/d", json: "{}", user: Self.ada).status == 201)
        let redirect = try await f.request("GET", "/db/_design%2Fd?x=1", user: Self.ada)
        #expect(redirect.status == 301)
        #expect(redirect.header("Location")?.hasSuffix("/db/_design/d?x=1") == true)
    }

    @Test func allDocsChecksItsParametersAsCouchDB() async throws {
        let f = try await DaemonFixture(users: Self.users, databases: ["db"])
        defer { Task { await f.stop() } }
        let docs = #"{"docs":[{"_id":"a"},{"_id":"b"},{"_id":"c"}]}"#
        #expect(try await f.request("POST", "/db/_bulk_docs", json: docs, user: Self.ada).status == 201)
        #expect(try await f.request("GET", "/db/_all_docs?skip=10", user: Self.ada).object["offset"] == .int(3))
        for bad in ["limit=-1", "skip=abc", "descending=maybe", "group=true"] {
            #expect(try await f.request("GET", "/db/_all_docs?\(bad)", user: Self.ada).object["error"] == "query_parse_error")
        }
        #expect(try await f.request("GET", "/db/_all_docs?startkey=notjson", user: Self.ada).object["error"] == "bad_request")
        let from = try await f.request("GET", "/db/_all_docs?startkey_docid=b&update_seq=true", user: Self.ada)
        #expect(from.object["rows"]?.arrayValue?.count == 2)
        #expect(from.object["update_seq"] != nil)
        let keys = try await f.request("POST", "/db/_all_docs", json: #"{"keys":["a","b"],"descending":true}"#, user: Self.ada)
        #expect(keys.object["rows"]?.arrayValue?.first?.objectValue?["id"] == "b")
    }
}
