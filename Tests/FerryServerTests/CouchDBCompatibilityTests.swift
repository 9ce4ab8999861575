import FerryHTTP
import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// What CouchDB's clients rely on and Ferry now answers as CouchDB 3.5 does (issue 32): CORS,
/// gzip request bodies, the `_changes` line layout, `_all_docs` offsets, `_security`,
/// `_users`, `_dbs_info`, `_missing_revs`. The same behaviour is checked against a real CouchDB
/// by Tests/REST/differential; these are the fast, always-run versions.
@Suite("CouchDB compatibility of the REST API")
struct CouchDBCompatibilityTests {
    static let root = ("root", "pw")

    func fixture(cors: CORSPolicy? = nil) async throws -> DaemonFixture {
        try await DaemonFixture(users: [DaemonFixture.user("root", "pw", ["*": .admin]), DaemonFixture.user("ann", "pw", [:])],
                                databases: ["alpha"]) { $0.cors = cors }
    }

    @Test func corsPreflightsAndAnswersCarryTheFieldsForAllowedOriginsOnly() async throws {
        var policy = CORSPolicy(origins: ["http://app.example"], credentials: true)
        policy.maxAge = 99
        let f = try await fixture(cors: policy)
        defer { Task { await f.stop() } }
        let pre = try await f.request("OPTIONS", "/alpha/doc", headers: [("Origin", "http://app.example"),
                                                                         ("Access-Control-Request-Method", "PUT"),
                                                                         ("Access-Control-Request-Headers", "Content-Type")])
        #expect(pre.status == 204, "a preflight needs no credentials")
        #expect(pre.header("Access-Control-Allow-Origin") == "http://app.example")
        #expect(pre.header("Access-Control-Allow-Credentials") == "true")
        #expect(pre.header("Access-Control-Allow-Headers") == "content-type")
        #expect(pre.header("Access-Control-Max-Age") == "99")
        #expect(pre.header("Access-Control-Allow-Methods")?.contains("PUT") == true)
        // A header not allowed, or another origin: not a preflight, so the plain answer (401).
        let odd = try await f.request("OPTIONS", "/alpha/doc", headers: [("Origin", "http://app.example"),
                                                                         ("Access-Control-Request-Method", "PUT"),
                                                                         ("Access-Control-Request-Headers", "x-odd")])
        #expect(odd.status == 401 && odd.header("Access-Control-Allow-Origin") == "http://app.example")
        let evil = try await f.request("GET", "/alpha", headers: [("Origin", "http://evil.example")], user: Self.root)
        #expect(evil.status == 200 && evil.header("Access-Control-Allow-Origin") == nil)
        let ok = try await f.request("GET", "/alpha", headers: [("Origin", "http://app.example")], user: Self.root)
        #expect(ok.header("Access-Control-Allow-Origin") == "http://app.example")
        #expect(ok.header("Access-Control-Expose-Headers")?.contains("etag") == true)

        let off = try await fixture()
        defer { Task { await off.stop() } }
        let refused = try await off.request("OPTIONS", "/alpha", headers: [("Origin", "http://app.example"), ("Access-Control-Request-Method", "GET")])
        #expect(refused.status == 401 && refused.header("Access-Control-Allow-Origin") == nil, "CORS is off by default")
    }

    @Test func gzipRequestBodiesAreInflatedAndOtherCodingsRefused() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let body = Gzip.encode(Array(#"{"docs":[{"_id":"g1"},{"_id":"g2"}]}"#.utf8))
        let r = try await f.request("POST", "/alpha/_bulk_docs", body: body,
                                    headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], user: Self.root)
        #expect(r.status == 201, "\(r.text)")
        #expect(try await f.request("GET", "/alpha/g2", user: Self.root).status == 200)
        let br = try await f.request("PUT", "/alpha/b", body: Array("{}".utf8), headers: [("Content-Encoding", "br")], user: Self.root)
        #expect(br.status == 415 && br.object["error"] == "bad_content_type")
        let bad = try await f.request("PUT", "/alpha/b", body: Array("{}".utf8), headers: [("Content-Encoding", "gzip")], user: Self.root)
        #expect(bad.status == 400 && bad.text.contains("gzipped"))
    }

    @Test func changesRowsComeOneALineAndAllDocsCountsItsOffset() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        for id in ["a", "b", "c"] { #expect(try await f.request("PUT", "/alpha/\(id)", json: "{}", user: Self.root).status == 201) }
        let changes = try await f.request("GET", "/alpha/_changes", user: Self.root)
        let lines = changes.text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == #"{"results":["#)
        #expect(lines.count == 7 && lines[4] == "],", "\(lines)")
        #expect(lines[5].hasPrefix(#""last_seq":"3""#))
        #expect(changes.header("Transfer-Encoding") == "chunked")
        let newest = try await f.request("GET", "/alpha/_changes?descending=true&limit=1", user: Self.root)
        #expect(newest.object["results"]?.arrayValue?.first?.objectValue?["id"] == "c")
        #expect(newest.object["pending"] == 2)
        let skipped = try await f.request("GET", "/alpha/_all_docs?skip=1", user: Self.root)
        #expect(skipped.object["rows"]?.arrayValue?.count == 2, "skip without limit")
        let from = try await f.request("GET", "/alpha/_all_docs?startkey=%22b%22", user: Self.root)
        #expect(from.object["offset"] == 1)
        let missing = try await f.request("GET", "/alpha/_all_docs?key=%22zz%22", user: Self.root)
        #expect(missing.object["rows"]?.arrayValue?.isEmpty == true && missing.object["offset"] == 3)
    }

    @Test func securityUsersAndTheSmallerRoutes() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        #expect(try await f.request("GET", "/alpha", user: ("ann", "pw")).status == 403)
        #expect(try await f.request("PUT", "/alpha/_security", json: #"{"readers":{"names":["ann"]}}"#, user: Self.root).status == 200)
        #expect(try await f.request("GET", "/alpha", user: ("ann", "pw")).status == 200)
        #expect(try await f.request("PUT", "/alpha/x", json: "{}", user: ("ann", "pw")).status == 403)
        #expect(try await f.request("PUT", "/alpha/_security", json: #"{"admins":[]}"#, user: Self.root).status == 400)

        let put = try await f.request("PUT", "/_users/org.couchdb.user:bo", json: #"{"name":"bo","password":"s3cret","roles":["r"],"type":"user"}"#,
                                      user: Self.root)
        #expect(put.status == 201)
        let doc = try await f.request("GET", "/_users/org.couchdb.user:bo", user: Self.root)
        #expect(!doc.text.contains("s3cret") && doc.object["roles"] == ["r"])
        #expect(try await f.request("GET", "/_session", user: ("bo", "s3cret")).object["userCtx"]?.objectValue?["name"] == "bo")
        #expect(try await f.request("PUT", "/_users/org.couchdb.user:bo", json: #"{"name":"bo","roles":[],"type":"user"}"#,
                                    user: Self.root).status == 409, "a change without _rev")
        #expect(try await f.request("GET", "/_users/org.couchdb.user:bo", user: ("ann", "pw")).status == 403)

        let info = try await f.request("POST", "/_dbs_info", json: #"{"keys":["alpha","nope"]}"#, user: Self.root)
        #expect(info.json?.arrayValue?.first?.objectValue?["info"]?.objectValue?["db_name"] == "alpha")
        #expect(info.json?.arrayValue?.last?.objectValue?["error"] == "not_found")
        let missing = try await f.request("POST", "/alpha/_missing_revs", json: #"{"x":["1-abc"]}"#, user: Self.root)
        #expect(missing.object["missing_revs"] == .object(["x": ["1-abc"]]))
        let conflict = try await f.request("POST", "/alpha/_bulk_docs", json: #"{"docs":[{"_id":"y","_rev":"1-abc"}]}"#, user: Self.root)
        #expect(conflict.status == 201 && conflict.json?.arrayValue?.first?.objectValue?["error"] == "conflict")
        #expect(try await f.request("GET", "/_active_tasks", user: Self.root).json == .array([]))
    }
}
