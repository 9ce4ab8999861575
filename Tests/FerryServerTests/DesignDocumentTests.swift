import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Testing

/// Design documents over REST and BLIP (Protocol/rest.md, "Design documents"): stored, listed,
/// replicated and served like any document; writing one needs the admin role, as CouchDB asks
/// of its database admins; what Ferry does not run is 501 naming it. Every refusal is checked
/// to have written nothing.
@Suite("Design documents: routes, the admin rule, COPY, BLIP")
struct DesignDocumentTests {
    static let users = [
        DaemonFixture.user("rita", "r-pass", ["db": .reader]),
        DaemonFixture.user("will", "w-pass", ["db": .writer]),
        DaemonFixture.user("adam", "a-pass", ["db": .admin]),
    ]
    static let reader = ("rita", "r-pass"), writer = ("will", "w-pass"), admin = ("adam", "a-pass")
    static let app = #"{"views":{"all":{"map":"function (doc) { emit(doc._id, null) }"}},"validate_doc_update":"function (n, o, u) { throw({forbidden: 'never'}) }"}"#

    func fixture() async throws -> DaemonFixture {
        try await DaemonFixture(users: Self.users, databases: ["db"])
    }

    @Test func anAdminWritesADesignDocumentEveryoneReadsIt() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let put = try await f.request("PUT", "/db/_design/app", json: Self.app, user: Self.admin)
        #expect(put.status == 201)
        #expect(put.object["id"]?.stringValue == "_design/app")
        #expect(put.header("Location") == "http://127.0.0.1:\(f.daemon.port)/db/_design%2Fapp", "absolute, as CouchDB's")
        let rev = try #require(put.object["rev"]?.stringValue)
        for user in [Self.reader, Self.writer, Self.admin] {
            let read = try await f.request("GET", "/db/_design/app", user: user)
            #expect(read.status == 200)
            #expect(read.object["_id"]?.stringValue == "_design/app")
            #expect(read.object["validate_doc_update"] != nil)
        }
        // The slash percent-encoded is redirected to the same document, as CouchDB does.
        let encoded = try await f.request("GET", "/db/_design%2Fapp", user: Self.reader)
        #expect(encoded.status == 301 && encoded.header("Location")?.hasSuffix("/db/_design/app") == true)
        #expect(try await f.request("GET", "/db/_design/app", user: Self.reader).object["_rev"]?.stringValue == rev)
        // Its validation function is kept, not run: ordinary writes go on.
        #expect(try await f.request("PUT", "/db/plain", json: "{}", user: Self.writer).status == 201)
        // Listed by _all_docs (in ID order, as CouchDB: `_` sorts between upper and lower case),
        // alone by _design_docs, and in the changes feed.
        #expect(try await f.request("PUT", "/db/Upper", json: "{}", user: Self.writer).status == 201)
        let all = try await f.request("GET", "/db/_all_docs", user: Self.reader)
        #expect(all.object["rows"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["Upper", "_design/app", "plain"])
        let design = try await f.request("GET", "/db/_design_docs?include_docs=true", user: Self.reader)
        #expect(design.object["total_rows"]?.intValue == 1)
        let rows = design.object["rows"]?.arrayValue ?? []
        #expect(rows.compactMap { $0.objectValue?["id"]?.stringValue } == ["_design/app"])
        #expect(rows.first?.objectValue?["doc"]?.objectValue?["views"] != nil)
        let keyed = try await f.request("POST", "/db/_design_docs", json: #"{"keys":["_design/app","plain","_design/none"]}"#, user: Self.reader)
        #expect(keyed.object["rows"]?.arrayValue?.map { $0.objectValue?["key"]?.stringValue } == ["_design/app", "_design/none"])
        let changes = try await f.request("GET", "/db/_changes?filter=_design", user: Self.reader)
        #expect(changes.object["results"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == ["_design/app"])
        // Mango never answers design documents, as CouchDB's does not.
        let found = try await f.request("POST", "/db/_find", json: #"{"selector":{}}"#, user: Self.reader)
        #expect(found.object["docs"]?.arrayValue?.compactMap { $0.objectValue?["_id"]?.stringValue } == ["Upper", "plain"])
        // Deleted by an admin.
        #expect(try await f.request("DELETE", "/db/_design/app?rev=\(rev)", user: Self.admin).status == 200)
        #expect(try await f.request("GET", "/db/_design/app", user: Self.reader).status == 404)
    }

    @Test func readersAndWritersMayNotWriteDesignDocuments() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let db = try #require(f.daemon.registry.database("db"))
        let rev = try #require(try await f.request("PUT", "/db/_design/app", json: Self.app, user: Self.admin).object["rev"]?.stringValue)
        _ = try db.save(Document(id: "src", properties: ["v": 1]))
        let before = db.lastSequence
        let refused: [(String, String, String?, [(String, String)])] = [
            ("PUT", "/db/_design/new", "{}", []),
            ("PUT", "/db/_design/app?rev=\(rev)", "{}", []),
            ("PUT", "/db/_design/app?new_edits=false", #"{"_rev":"9-aa"}"#, []),
            ("DELETE", "/db/_design/app?rev=\(rev)", nil, []),
            ("POST", "/db", #"{"_id":"_design/posted"}"#, []),
            ("PUT", "/db/_design/app/note.txt?rev=\(rev)", "hi", []),
            ("DELETE", "/db/_design/app/note.txt?rev=\(rev)", nil, []),
            ("COPY", "/db/src", nil, [("Destination", "_design/copied")]),
        ]
        for user in [Self.reader, Self.writer] {
            for (method, path, body, headers) in refused {
                let r = try await f.request(method, path, json: body, headers: headers, user: user)
                #expect(r.status == 403, "\(method) \(path) as \(user.0)")
                #expect(r.object["error"]?.stringValue == "forbidden")
            }
        }
        // The writer's message is CouchDB's own for its members.
        let w = try await f.request("PUT", "/db/_design/new", json: "{}", user: Self.writer)
        #expect(w.object["reason"]?.stringValue == "You are not a db or server admin.")
        #expect(db.lastSequence == before)

        // _bulk_docs refuses the design document alone, in place, and saves the rest.
        let bulk = try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[{"_id":"_design/b"},{"_id":"ok1"}]}"#, user: Self.writer)
        #expect(bulk.status == 201)
        let items = bulk.json?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(items.count == 2)
        #expect(items.first?["id"]?.stringValue == "_design/b" && items.first?["error"]?.stringValue == "forbidden")
        #expect(items.last?["ok"] == .bool(true) && items.last?["id"]?.stringValue == "ok1")
        let replicated = try await f.request("POST", "/db/_bulk_docs", json:
            #"{"new_edits":false,"docs":[{"_id":"_design/c","_rev":"1-aa"},{"_id":"ok2","_rev":"1-bb"}]}"#, user: Self.writer)
        #expect(replicated.json == .array([.object(["id": "_design/c", "rev": "1-aa", "error": "forbidden",
                                                   "reason": "You are not a db or server admin."])]))
        #expect(try db.document("_design/b") == nil && db.document("_design/c") == nil)
        #expect(try db.document("ok1") != nil && db.document("ok2") != nil)
        // The admin may do all of it.
        #expect(try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[{"_id":"_design/b"}]}"#, user: Self.admin)
            .json?.arrayValue?.first?.objectValue?["ok"] == .bool(true))
        let att = try await f.request("PUT", "/db/_design/app/note.txt?rev=\(rev)", body: Array("hello".utf8),
                                      headers: [("Content-Type", "text/plain")], user: Self.admin)
        #expect(att.status == 201)
        let bytes = try await f.request("GET", "/db/_design/app/note.txt", user: Self.reader)
        #expect(bytes.status == 200 && bytes.text == "hello")
    }

    @Test func whatFerryDoesNotRunIsNamedAndOtherReservedIDsAreIllegal() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        #expect(try await f.request("PUT", "/db/_design/app", json: Self.app, user: Self.admin).status == 201)
        let view = try await f.request("GET", "/db/_design/app/_view/all", user: Self.reader)
        #expect(view.status == 501)
        #expect(view.object["error"]?.stringValue == "not_implemented")
        #expect(view.object["reason"]?.stringValue == "Ferry does not run JavaScript views (_view)")
        for path in ["_info", "_show/s", "_list/l/all", "_update/u", "_rewrite/x", "_search/i", "_nouveau/i"] {
            let r = try await f.request(path.hasPrefix("_update") ? "POST" : "GET", "/db/_design/app/\(path)", user: Self.reader)
            #expect(r.status == 501, "\(path)")
            #expect(r.object["reason"]?.stringValue?.contains(String(path.split(separator: "/")[0])) == true, "\(path)")
        }
        // A design document that is not there: 404, as CouchDB answers before anything else.
        #expect(try await f.request("GET", "/db/_design/none/_view/all", user: Self.reader).object["error"]?.stringValue == "not_found")
        #expect(try await f.request("GET", "/db/_changes?filter=_view&view=app/all", user: Self.reader).status == 501)
        #expect(try await f.request("GET", "/db/_changes?filter=app/mine", user: Self.reader).status == 501)
        #expect(try await f.request("GET", "/db/_changes?filter=none/mine", user: Self.reader).status == 404)

        // IDs CouchDB reserves: `illegal_docid` with its reason, whole _bulk_docs requests too.
        let reserved = "Only reserved document ids may start with underscore."
        for (method, path, body) in [("PUT", "/db/_foo", "{}"), ("PUT", "/db/_design", "{}"), ("POST", "/db", #"{"_id":"_foo"}"#),
                                     ("POST", "/db/_bulk_docs", #"{"docs":[{"_id":"fine"},{"_id":"_foo"}]}"#),
                                     ("POST", "/db/_bulk_docs", #"{"new_edits":false,"docs":[{"_id":"_foo","_rev":"1-aa"}]}"#)] {
            let r = try await f.request(method, path, json: body, user: Self.admin)
            #expect(r.status == 400, "\(method) \(path) \(body)")
            #expect(r.object["error"]?.stringValue == "illegal_docid")
            #expect(r.object["reason"]?.stringValue == reserved)
        }
        let empty = try await f.request("POST", "/db/_bulk_docs", json: #"{"docs":[{"_id":""}]}"#, user: Self.admin)
        #expect(empty.object["reason"]?.stringValue == "Document id must not be empty")
        #expect(try f.daemon.registry.database("db")?.document("fine") == nil)
    }

    @Test func copyMakesTheDestinationAsCouchDBDoes() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let src = try await f.request("PUT", "/db/src", json: #"{"v":1}"#, user: Self.writer)
        let srcRev = try #require(src.object["rev"]?.stringValue)
        let att = try await f.request("PUT", "/db/src/a.txt?rev=\(srcRev)", body: Array("hello".utf8),
                                      headers: [("Content-Type", "text/plain")], user: Self.writer)
        let rev2 = try #require(att.object["rev"]?.stringValue)

        let copy = try await f.request("COPY", "/db/src", headers: [("Destination", "dst")], user: Self.writer)
        #expect(copy.status == 201)
        #expect(copy.object["ok"] == .bool(true) && copy.object["id"]?.stringValue == "dst")
        let dstRev = try #require(copy.object["rev"]?.stringValue)
        #expect(copy.header("ETag") == "\"\(dstRev)\"")
        #expect(copy.header("Location") == "http://127.0.0.1:\(f.daemon.port)/db/dst")
        let dst = try await f.request("GET", "/db/dst", user: Self.reader)
        #expect(dst.object["v"]?.intValue == 1)
        #expect(try await f.request("GET", "/db/dst/a.txt", user: Self.reader).text == "hello")
        // Onto an existing document: its current revision in the header, else 409.
        let again = try await f.request("COPY", "/db/src", headers: [("Destination", "dst")], user: Self.writer)
        #expect(again.status == 409 && again.object["error"]?.stringValue == "conflict")
        #expect(try await f.request("COPY", "/db/src", headers: [("Destination", "dst?rev=1-00")], user: Self.writer).status == 409)
        let replaced = try await f.request("COPY", "/db/src?rev=\(rev2)", headers: [("Destination", "dst?rev=\(dstRev)")], user: Self.writer)
        #expect(replaced.status == 201)
        #expect(replaced.object["rev"]?.stringValue?.hasPrefix("2-") == true)
        #expect(try await f.request("GET", "/db/dst/a.txt", user: Self.reader).text == "hello")
        // A source revision whose body is not kept here is 404, as a missing one.
        #expect(try await f.request("COPY", "/db/src?rev=\(srcRev)", headers: [("Destination", "dst3")], user: Self.writer).status == 404)
        // The destination is percent-decoded; a design document source copies for a writer.
        #expect(try await f.request("COPY", "/db/src", headers: [("Destination", "a%20b")], user: Self.writer).object["id"]?.stringValue == "a b")
        #expect(try await f.request("PUT", "/db/_design/app", json: Self.app, user: Self.admin).status == 201)
        #expect(try await f.request("COPY", "/db/_design/app", headers: [("Destination", "plain-copy")], user: Self.writer).status == 201)
        // Errors: no Destination, a missing source, a reserved destination.
        let none = try await f.request("COPY", "/db/src", user: Self.writer)
        #expect(none.status == 400 && none.object["reason"]?.stringValue == "Destination header is mandatory for COPY.")
        #expect(try await f.request("COPY", "/db/missing", headers: [("Destination", "x")], user: Self.writer).status == 404)
        #expect(try await f.request("COPY", "/db/src", headers: [("Destination", "_foo")], user: Self.writer).object["error"]?.stringValue == "illegal_docid")
        #expect(try await f.request("COPY", "/db/src", headers: [("Destination", "r")], user: Self.reader).status == 403)
    }

    @Test func blipReplicatesDesignDocumentsAndRefusesAWritersPush() async throws {
        let f = try await fixture()
        defer { Task { await f.stop() } }
        let served = try #require(f.daemon.registry.database("db"))
        let local = try Database.open(at: f.dir.path("local.ferry"))
        defer { local.close() }
        _ = try local.save(Document(id: "_design/pushed", properties: ["views": ["v": ["map": "function (d) {}"]]]))
        _ = try local.save(Document(id: "plain", properties: ["x": 1]))
        func replicator(_ type: ReplicatorConfiguration.ReplicatorType, _ user: (String, String), into db: Database) -> Replicator {
            var c = ReplicatorConfiguration(database: db, target: f.daemon.replicationURL(for: "db"))
            c.webSocket = DaemonFixture.patientReplicationWebSocket
            c.type = type
            c.authenticator = .basic(user: user.0, password: user.1)
            c.maxAttempts = 1
            return Replicator(configuration: c)
        }
        // A writer's push: the design document is refused with 403 and named; the rest arrives.
        let push = replicator(.push, Self.writer, into: local)
        let events = push.documentEvents()
        let failures = Task { () -> [DocumentEvent] in
            var out: [DocumentEvent] = []
            for await e in events { if case .failed = e.kind { out.append(e) } }
            return out
        }
        try await push.run()
        #expect(try served.document("plain")?.properties["x"] == 1)
        #expect(try served.document("_design/pushed") == nil)
        let failed = await failures.value
        #expect(failed.map(\.documentID) == ["_design/pushed"])
        #expect(failed.first?.kind == .failed(.remote(domain: "HTTP", code: 403, message: "You are not a db or server admin.")))

        // The refused revision is behind the push's checkpoint (as a revision refused by a
        // validation function is); edited, it goes again, and an admin's push stores it. A
        // pull elsewhere brings it with its history.
        var design = try #require(try local.document("_design/pushed"))
        design["language"] = "javascript"
        try local.save(design)
        try await replicator(.push, Self.admin, into: local).run()
        #expect(try served.document("_design/pushed")?.properties["views"] != nil)
        let other = try Database.open(at: f.dir.path("other.ferry"))
        defer { other.close() }
        try await replicator(.pull, Self.reader, into: other).run()
        #expect(try other.document("_design/pushed")?.revisionID == served.document("_design/pushed")?.revisionID)
        #expect(try other.document("plain") != nil)
    }

    @Test func serveCreatesAMissingDataDirectoryForItsOwnerOnly() async throws {
        let tmp = TempDir()
        let dir = tmp.path("not/there/yet")
        let serve = try await ServeProcess(["--data", dir, "--allow-anonymous", "--anonymous-role", "admin"])
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) && isDirectory.boolValue)
        let mode = try FileManager.default.attributesOfItem(atPath: dir)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        #expect(FileManager.default.fileExists(atPath: dir + "/_daemon.lock"))
        let made = try await HTTPTestClient.send(port: Int(serve.baseURL.split(separator: ":").last ?? "") ?? 0,
                                                 method: "PUT", path: "/db", headers: [], body: nil)
        #expect(made.status == 201)
        #expect(await serve.stop() == 0)
        // An existing directory keeps its mode.
        let open = tmp.path("open")
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        try DatabaseRegistry.createDataDirectory(open)
        #expect(try FileManager.default.attributesOfItem(atPath: open)[.posixPermissions] as? Int == 0o755)
    }
}
