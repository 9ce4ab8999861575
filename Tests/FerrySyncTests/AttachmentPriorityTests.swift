import FerryStore
@testable import FerrySync
import Foundation
import Synchronization
import Testing

/// Pulls with a download policy: revisions first, then attachments by priority over the same
/// connection; skipped ones kept as metadata and fetched later.
@Suite("Attachment download priorities")
struct AttachmentPriorityTests {
    /// Text first, nothing over 1 MiB, the rest at priority 0 (the acceptance policy of issue 20).
    static let rules = [
        AttachmentDownloadRule(contentType: "text/*", priority: 10),
        AttachmentDownloadRule(minLength: 1_048_577, skip: true),
    ]

    /// What a peer serves: kind, size and content type per attachment.
    struct Planted {
        let documentID: String
        let name: String
        let bytes: [UInt8]
        let contentType: String
        var isText: Bool { contentType.lowercased().hasPrefix("text/") }
        var isLarge: Bool { bytes.count > 1 << 20 }
    }

    /// Saves documents on `peer`, in one transaction (so a continuous pull gets them as one
    /// burst), whose attachments interleave text, small binary and large binary ones, so
    /// arrival order alone would mix them; one document holds both kinds.
    static func plant(on peer: Peer, prefix: String = "", seed: UInt64 = 1) throws -> [Planted] {
        var docs: [Document] = []
        var planted: [Planted] = []
        let specs: [(String, Int, String)] = [
            ("bin", 40_000, "application/octet-stream"), ("text", 3_000, "text/plain; charset=utf-8"),
            ("big", (3 << 19), "video/mp4"), ("bin", 70_000, "image/png"), ("text", 9_000, "text/markdown"),
            ("bin", 1_000, "application/pdf"), ("big", (1 << 20) + 1, "application/zip"), ("text", 500, "TEXT/CSV"),
        ]
        for (i, (kind, size, type)) in specs.enumerated() {
            let id = "\(prefix)doc-\(i)-\(kind)"
            let bytes = AttachmentReplicationTests.bytes(size, seed: seed * 100 + UInt64(i))
            var doc = Document(id: id, properties: ["kind": .string(kind)])
            doc.setAttachment("\(kind)-\(i)", blob: try peer.db.writeBlob(bytes), contentType: type)
            planted.append(Planted(documentID: id, name: "\(kind)-\(i)", bytes: bytes, contentType: type))
            if i == 3 {
                let extra = Array("a note beside the image \(i) of \(prefix)".utf8)
                doc.setAttachment("note-\(i)", blob: try peer.db.writeBlob(extra), contentType: "text/plain")
                planted.append(Planted(documentID: id, name: "note-\(i)", bytes: extra, contentType: "text/plain"))
            }
            docs.append(doc)
        }
        try peer.db.inBatch { (b) throws(StoreError) in for d in docs { try b.save(d) } }
        return planted
    }

    /// The attachment `p` as stored in `db`.
    static func stored(_ p: Planted, in db: Database) throws -> FerryStore.Attachment {
        let doc = try #require(try db.document(p.documentID))
        let attachments = try db.attachments(of: doc)
        return try #require(attachments.first { $0.name == p.name })
    }

    /// Collects attachment events and, at the first one, how many documents were stored.
    final class Recorder: Sendable {
        let events = Mutex<[AttachmentEvent]>([])
        let documentsAtFirstEvent = Mutex<Int?>(nil)
        init(_ r: Replicator, database: Database) {
            r.addAttachmentListener { [self] e in
                if documentsAtFirstEvent.withLock({ $0 }) == nil {
                    let n = (try? database.allDocuments(after: nil, limit: 1000).count) ?? -1
                    documentsAtFirstEvent.withLock { $0 = n }
                }
                events.withLock { $0.append(e) }
            }
        }
        var all: [AttachmentEvent] { events.withLock { $0 } }

        /// Waits (up to 120 s: the whole suite shares two cores) until `count` events came.
        func wait(for count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(120)
            while all.count < count {
                guard ContinuousClock.now < deadline else {
                    Issue.record("\(all.count) of \(count) attachment events came: \(all.map(\.name))")
                    throw CancellationError()
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// A pull from `peer` into `local` with `rules` as its download policy.
    static func pull(into local: Peer, from peer: Peer, continuous: Bool = false) -> Replicator {
        var c = ReplicatorConfiguration(database: local.db, target: peer.url)
        c.type = .pull
        c.continuous = continuous
        c.attachmentDownloadPolicy = .rules(Self.rules)
        return Replicator(configuration: c)
    }

    @Test func aOneShotPullFetchesByPriorityAndLeavesTheLargeOnesAsMetadata() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let planted = try Self.plant(on: naomi)
        let olga = try await Peer.make("olga")
        let r = Self.pull(into: olga, from: naomi)
        let recorder = Recorder(r, database: olga.db)
        let log = EventLog(r)
        try await r.run()

        // Every revision was stored before the first attachment was downloaded.
        let documents = Set(planted.map(\.documentID)).count
        #expect(recorder.documentsAtFirstEvent.withLock { $0 } == documents)
        #expect(await log.task.value.filter { $0.kind == .pulled }.count == documents)

        // Fetched in priority order: every text attachment before any binary one.
        let events = recorder.all
        let wanted = planted.filter { !$0.isLarge }
        #expect(events.count == wanted.count)
        #expect(events.allSatisfy { $0.kind == .fetched })
        let kinds = events.map { e in planted.first { $0.name == e.name }?.isText ?? false }
        #expect(kinds == Array(repeating: true, count: wanted.count { $0.isText }) + Array(repeating: false, count: wanted.count { !$0.isText }),
                "\(events.map(\.name))")
        #expect(events.map(\.priority) == kinds.map { $0 ? 10 : 0 })
        // Ties in arrival order (revisions come in sequence order, names in order within one).
        #expect(events.map(\.name) == planted.filter(\.isText).map(\.name) + planted.filter { !$0.isText && !$0.isLarge }.map(\.name))
        for p in wanted {
            let a = try Self.stored(p, in: olga.db)
            #expect(a.isFetched, "\(p.name)")
            #expect(try olga.db.readBlob(digest: a.digest).readAll() == p.bytes)
        }

        // The large ones: unfetched, their metadata intact.
        let large = planted.filter(\.isLarge)
        #expect(large.count == 2)
        for p in large {
            let a = try Self.stored(p, in: olga.db)
            #expect(!a.isFetched)
            #expect(a.length == Int64(p.bytes.count) && a.contentType == p.contentType && a.digest == BlobDigest(of: p.bytes))
            #expect(throws: StoreError.self) { try olga.db.readBlob(digest: a.digest) }
        }

        // On demand, later.
        let later = Recorder(r, database: olga.db)
        #expect(try await r.fetchAttachments() == 2)
        for p in large {
            let a = try Self.stored(p, in: olga.db)
            #expect(a.isFetched)
            #expect(try olga.db.readBlob(digest: a.digest).readAll() == p.bytes)
        }
        #expect(Set(later.all.map(\.name)) == Set(large.map(\.name)) && later.all.allSatisfy { $0.priority == nil && $0.kind == .fetched })
        #expect(try await r.fetchAttachments() == 0)
        await naomi.stop(); await olga.stop()
    }

    @Test func anAttachmentThePeerLacksIsADocumentFailureAndTheRestArrive() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let planted = try Self.plant(on: naomi)
        // A revision whose blob the peer does not have (as one pulled with a policy would be).
        let missing = Array("never written".utf8)
        let body = #"{"_attachments":{"gone.txt":{"content_type":"text/plain","digest":"\#(BlobDigest(of: missing))","length":\#(missing.count),"revpos":1,"stub":true}}}"#
        try naomi.db.insert(ReplicatedRevision(documentID: "ghost", history: ["1-abcd"], body: Array(body.utf8)))

        let olga = try await Peer.make("olga")
        let r = Self.pull(into: olga, from: naomi)
        let recorder = Recorder(r, database: olga.db)
        let log = EventLog(r)
        try await r.run()

        let failures = await log.task.value.filter { if case .failed = $0.kind { return true } else { return false } }
        #expect(failures.map(\.documentID) == ["ghost"])
        #expect(failures.first?.kind == .failed(.remote(domain: "HTTP", code: 404, message: "no attachment \(BlobDigest(of: missing))")))
        #expect(try olga.db.document("ghost") != nil, "the revision is stored; only its attachment failed")
        let ghost = recorder.all.filter { $0.documentID == "ghost" }
        #expect(ghost.count == 1 && ghost.first.map { if case .failed = $0.kind { true } else { false } } == true)
        for p in planted where !p.isLarge { #expect(try Self.stored(p, in: olga.db).isFetched, "\(p.name)") }
        #expect(r.status.lastError == nil)
        await naomi.stop(); await olga.stop()
    }

    @Test func aContinuousPullDownloadsWhenIdleEachBurstByPriority() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let first = try Self.plant(on: naomi, prefix: "a-", seed: 1)
        let olga = try await Peer.make("olga")
        let r = Self.pull(into: olga, from: naomi, continuous: true)
        let recorder = Recorder(r, database: olga.db)
        r.start()
        let firstCount = first.count { !$0.isLarge }
        try await recorder.wait(for: firstCount)

        let second = try Self.plant(on: naomi, prefix: "b-", seed: 2)
        try await recorder.wait(for: firstCount + second.count { !$0.isLarge })
        // Idle again once they are in.
        let deadline = ContinuousClock.now + .seconds(60)
        while r.status.activity != .idle && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(r.status.activity == .idle)
        await r.stop()

        for (batch, events) in [(first, Array(recorder.all.prefix(firstCount))), (second, Array(recorder.all.dropFirst(firstCount)))] {
            let isText = events.map { e in batch.first { $0.name == e.name }?.isText ?? false }
            #expect(isText == isText.sorted { $0 && !$1 }, "\(events.map(\.name))")
            #expect(Set(events.map(\.name)) == Set(batch.filter { !$0.isLarge }.map(\.name)))
        }
        for p in first + second { #expect(try Self.stored(p, in: olga.db).isFetched == !p.isLarge, "\(p.documentID)/\(p.name)") }
        await naomi.stop(); await olga.stop()
    }

    @Test func withoutAPolicyAttachmentsStillArriveWithTheirRevisions() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let planted = try Self.plant(on: naomi)
        let olga = try await Peer.make("olga")
        let r = try await replicate(olga, with: naomi, .pull)
        let recorder = Recorder(r, database: olga.db)
        for p in planted { #expect(try Self.stored(p, in: olga.db).isFetched, "\(p.name)") }
        #expect(recorder.all.isEmpty)
        await naomi.stop(); await olga.stop()
    }
}
