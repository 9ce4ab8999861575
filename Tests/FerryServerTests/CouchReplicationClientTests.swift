import FerryServer
import FerryStore
import FerrySync
import FerryTestSupport
import Foundation
import Testing

/// The CouchDB replication client (Protocol/replication-http.md) against `ferry serve`'s own
/// CouchDB-shaped REST API: hermetic, on real sockets. The real CouchDB is Tests/CouchDBClient's.
@Suite("CouchDB replication client against ferry serve")
struct CouchReplicationClientTests {
    static let admin = ("admin", "secret")

    /// A daemon whose `remote` database keeps conflicts (`keep`), so leaf sets compare.
    func daemon() async throws -> DaemonFixture {
        let f = try await DaemonFixture(users: [DaemonFixture.user("admin", "secret", ["*": .admin])])
        _ = try f.daemon.registry.create("remote", conflictPolicy: .keep)
        return f
    }

    /// Runs one replication of `db` with the daemon's `remote` database; returns its counts and error.
    func run(_ db: Database, _ fixture: DaemonFixture, _ type: ReplicatorConfiguration.ReplicatorType,
             password: String = "secret", configure: (inout ReplicatorConfiguration) -> Void = { _ in })
        async -> (pushed: Int, pulled: Int, failed: Int, error: ReplicationError?) {
        var c = ReplicatorConfiguration(database: db, target: "http://admin:\(password)@127.0.0.1:\(fixture.daemon.port)/remote")
        c.type = type
        c.maxAttempts = 1
        configure(&c)
        let r = Replicator(configuration: c)
        let events = r.documentEvents()
        let counting = Task {
            var n = (0, 0, 0)
            for await e in events {
                switch e.kind {
                case .pushed: n.0 += 1
                case .pulled: n.1 += 1
                case .failed: n.2 += 1
                case .conflictResolved: break
                }
            }
            return n
        }
        r.start()
        let error = await r.waitUntilStopped()
        let n = await counting.value
        return (n.0, n.1, n.2, error)
    }

    /// Every document's leaves (revision → body) in `db`.
    func leaves(_ db: Database, _ ids: [String]) throws -> [String: [String: [UInt8]]] {
        var out: [String: [String: [UInt8]]] = [:]
        for (id, tree) in try db.revisionTrees(of: ids) {
            out[id] = Dictionary(uniqueKeysWithValues: tree.leaves.map { ($0.revisionID.description, $0.body ?? []) })
        }
        return out
    }

    @Test func pushThenPullKeepsEveryRevisionAndASecondRunMovesNothing() async throws {
        let fixture = try await daemon()
        let dir = TempDir()
        let a = try Database.open(at: dir.path("a.ferry"))
        try a.setConflictPolicy(.keep)
        var ids: [String] = []
        for i in 0..<300 {
            let id = "doc-\(i)"
            ids.append(id)
            _ = try a.save(Document(id: id, properties: ["n": .int(Int64(i)), "text": .string(String(repeating: "x", count: 200))]))
        }
        _ = try a.delete(try #require(try a.document("doc-7")))
        // A conflict, as a replicator would bring one.
        try a.insert(ReplicatedRevision(documentID: "doc-3", history: ["1-" + String(repeating: "b", count: 32)],
                                        body: Array(#"{"side":"other"}"#.utf8)), resolver: nil)
        // An attachment.
        let blob = try a.writeBlob(Array("attached bytes".utf8))
        var withAttachment = try #require(try a.document("doc-5"))
        withAttachment.properties["_attachments"] = .object(["note.txt": .object(["content_type": "text/plain", "digest": .string(blob.digest.description),
                                                                                  "length": .int(blob.length)])])
        _ = try a.save(withAttachment)
        // A large one: pushed as multipart/related, pulled with a GET of its own.
        let large = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        let bigBlob = try a.writeBlob(large)
        var withLarge = try #require(try a.document("doc-6"))
        withLarge.properties["_attachments"] = .object(["big.bin": .object(["content_type": "application/octet-stream",
                                                                            "digest": .string(bigBlob.digest.description),
                                                                            "length": .int(bigBlob.length)])])
        _ = try a.save(withLarge)

        let push = await run(a, fixture, .push)
        #expect(push.error == nil, "\(String(describing: push.error))")
        #expect(push.pushed == 302 - 1 && push.failed == 0, "\(push)")
        let remote = try #require(fixture.daemon.registry.database("remote"))
        #expect(try leaves(remote, ids).mapValues { Set($0.keys) } == leaves(a, ids).mapValues { Set($0.keys) })
        let again = await run(a, fixture, .push)
        #expect(again.error == nil && again.pushed == 0, "a second push moves nothing: \(again)")

        let b = try Database.open(at: dir.path("b.ferry"))
        try b.setConflictPolicy(.keep)
        let pull = await run(b, fixture, .pull)
        #expect(pull.error == nil && pull.pulled == 302 - 1 && pull.failed == 0, "\(pull)")
        // Bodies arrive as they left; an attachment entry gains CouchDB's revpos and MD5 on the way.
        let plain = ids.filter { $0 != "doc-5" && $0 != "doc-6" }
        #expect(try leaves(b, plain) == leaves(a, plain), "leaves and bodies arrive as they left")
        #expect(try b.revisionTree(of: "doc-3")?.leaves.count == 2, "the conflict travels as a conflict under keep")
        let attachment = try #require(try b.document("doc-5")?.properties["_attachments"]?.objectValue?["note.txt"]?.objectValue)
        let digest = try BlobDigest(try #require(attachment["digest"]?.stringValue))
        #expect(try b.readBlob(digest: digest).readAll() == Array("attached bytes".utf8))
        let big = try #require(try b.document("doc-6")?.properties["_attachments"]?.objectValue?["big.bin"]?.objectValue)
        #expect(try b.readBlob(digest: BlobDigest(try #require(big["digest"]?.stringValue))).readAll() == large)
        let onRemote = try #require(try remote.document("doc-6")?.properties["_attachments"]?.objectValue?["big.bin"]?.objectValue)
        #expect(onRemote["length"]?.intValue == 300_000, "the multipart push stored the whole attachment")
        let pullAgain = await run(b, fixture, .pull)
        #expect(pullAgain.error == nil && pullAgain.pulled == 0, "a second pull moves nothing: \(pullAgain)")
        await fixture.stop()
    }

    @Test func theCheckpointIsCouchDBsLocalDocumentOnBothEnds() async throws {
        let fixture = try await daemon()
        let dir = TempDir()
        let a = try Database.open(at: dir.path("a.ferry"))
        for i in 0..<10 { _ = try a.save(Document(id: "d\(i)", properties: ["i": .int(Int64(i))])) }
        let push = await run(a, fixture, .push)
        #expect(push.error == nil)
        let remote = try #require(fixture.daemon.registry.database("remote"))
        let onRemote = try remote.localDocuments(withPrefix: "")
        #expect(onRemote.count == 1)
        let doc = try #require(onRemote.first)
        #expect(doc.id.count == 32 && doc.id.allSatisfy(\.isHexDigit), "CouchDB's replication ID form: \(doc.id)")
        #expect(doc.properties["source_last_seq"]?.intValue == 10)
        #expect(doc.properties["session_id"]?.stringValue != nil && doc.properties["history"]?.arrayValue?.isEmpty == false)
        #expect(try a.localDocument(doc.id)?.properties["session_id"] == doc.properties["session_id"], "the same copy on the source")
        await fixture.stop()
    }

    @Test func aWrongPasswordIsRefusedAndWritesNothing() async throws {
        let fixture = try await daemon()
        let dir = TempDir()
        let a = try Database.open(at: dir.path("a.ferry"))
        _ = try a.save(Document(id: "x", properties: [:]))
        let r = await run(a, fixture, .pushAndPull, password: "wrong")
        guard case .httpStatus(401, _)? = r.error else {
            Issue.record("expected HTTP 401, got \(String(describing: r.error))")
            return
        }
        #expect(try fixture.daemon.registry.database("remote")?.documentCount() == 0)
        await fixture.stop()
    }

    @Test func documentIDsFilterBothWays() async throws {
        let fixture = try await daemon()
        let dir = TempDir()
        let a = try Database.open(at: dir.path("a.ferry"))
        for i in 0..<20 { _ = try a.save(Document(id: "d\(i)", properties: [:])) }
        let push = await run(a, fixture, .push) { $0.documentIDs = ["d1", "d2"] }
        #expect(push.error == nil && push.pushed == 2)
        let all = await run(a, fixture, .push)
        #expect(all.pushed == 18, "another filter is another replication (its own checkpoint); what is there already is not sent")
        let b = try Database.open(at: dir.path("b.ferry"))
        let pull = await run(b, fixture, .pull) { $0.documentIDs = ["d3"] }
        let count = try b.documentCount()
        #expect(pull.error == nil && pull.pulled == 1 && count == 1)
        await fixture.stop()
    }
}
