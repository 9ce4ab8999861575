import FerryStore
@testable import FerrySync
import Synchronization
import Testing

/// Couchbase Lite's "Conflicts when Replicating" example (its "Handling Data Conflicts" page;
/// Protocol/revisions.md, "Default resolver"), end to end: Molly and Naomi edit the same document
/// while apart, then sync (Molly connects to Naomi, push and pull); both must end with the same
/// current revision and body.
@Suite("Molly and Naomi resolve conflicts the same way")
struct ConflictTests {
    /// Makes the shared document, syncs it, applies the two offline edit scripts, syncs again.
    func scenario(molly mollyEdits: [[String: JSONValue]?], naomi naomiEdits: [[String: JSONValue]?],
                  resolver: ConflictResolver? = nil) async throws -> (Peer, Peer, [DocumentEvent]) {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        try molly.put("doc", ["title": "shared", "v": 0])
        try await replicate(molly, with: naomi)
        #expect(try naomi.current("doc") == molly.current("doc"))
        for (peer, edits) in [(molly, mollyEdits), (naomi, naomiEdits)] {
            for edit in edits {
                let doc = try #require(try peer.db.document("doc", includeDeleted: true))
                if let edit { var d = doc; d.properties = edit; try peer.db.save(d) } else { try peer.db.delete(doc) }
            }
        }
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.conflictResolver = resolver
        let r = Replicator(configuration: c)
        let log = EventLog(r)
        try await r.run()
        let events = await log.task.value
        #expect(try molly.current("doc") == naomi.current("doc"), "peers disagree on the current revision")
        #expect(try molly.db.document("doc", includeDeleted: true)?.properties == naomi.db.document("doc", includeDeleted: true)?.properties)
        #expect(try molly.db.conflictingRevisions(of: "doc").isEmpty)
        #expect(try naomi.db.conflictingRevisions(of: "doc").isEmpty)
        return (molly, naomi, events)
    }

    @Test func differentEditsConvergeOnBothPeers() async throws {
        let (molly, naomi, events) = try await scenario(molly: [["title": "molly"]], naomi: [["title": "naomi"]])
        #expect(events.contains { $0.kind == .conflictResolved })
        // Equal generations: the higher revision ID's content wins, whoever resolves.
        let body = try #require(try molly.body("doc"))
        #expect(body == ["title": "molly"] || body == ["title": "naomi"])
        await molly.stop(); await naomi.stop()
    }

    @Test func deletionBeatsUpdateEitherWay() async throws {
        var (molly, naomi, _) = try await scenario(molly: [nil], naomi: [["title": "naomi edit"]])
        #expect(try molly.db.document("doc") == nil && naomi.db.document("doc") == nil)
        await molly.stop(); await naomi.stop()
        (molly, naomi, _) = try await scenario(molly: [["title": "molly edit"]], naomi: [nil])
        #expect(try molly.db.document("doc") == nil && naomi.db.document("doc") == nil)
        await molly.stop(); await naomi.stop()
    }

    @Test func longerBranchWinsEitherWay() async throws {
        var (molly, naomi, _) = try await scenario(molly: [["v": 1], ["v": 2], ["v": 3, "by": "molly"]],
                                                   naomi: [["v": 1], ["v": 2, "by": "naomi"]])
        #expect(try molly.body("doc") == ["v": 3, "by": "molly"])
        await molly.stop(); await naomi.stop()
        (molly, naomi, _) = try await scenario(molly: [["v": 1], ["v": 2, "by": "molly"]],
                                               naomi: [["v": 1], ["v": 2], ["v": 3, "by": "naomi"]])
        #expect(try naomi.body("doc") == ["v": 3, "by": "naomi"])
        await molly.stop(); await naomi.stop()
    }

    @Test func equalEditsPickTheSameWinnerWhoeverConnects() async throws {
        // Molly connects to Naomi, then (fresh peers, same edits) Naomi's content is checked
        // against what the revision-ID tie-break predicts.
        let (molly, naomi, _) = try await scenario(molly: [["side": "a"]], naomi: [["side": "b"]])
        let a = RevisionID.make(parent: try #require(try RevisionID(molly.db.revisionTree(of: "doc")?.history(of: try #require(try molly.db.document("doc")?.revisionID)).last?.description ?? "")), deleted: false, canonicalBody: Array(#"{"side":"a"}"#.utf8))
        let b = RevisionID.make(parent: try RevisionID(molly.db.revisionTree(of: "doc")?.history(of: try #require(try molly.db.document("doc")?.revisionID)).last?.description ?? ""), deleted: false, canonicalBody: Array(#"{"side":"b"}"#.utf8))
        let expected: [String: JSONValue] = a > b ? ["side": "a"] : ["side": "b"]
        #expect(try molly.body("doc") == expected)
        #expect(try naomi.body("doc") == expected)
        await molly.stop(); await naomi.stop()
    }

    @Test func customResolverLocalRemoteMergeAndDelete() async throws {
        let local = ConflictResolver.custom { $0.local }
        var (molly, naomi, _) = try await scenario(molly: [["who": "molly"]], naomi: [["who": "naomi"]], resolver: local)
        #expect(try naomi.body("doc") == ["who": "molly"])
        await molly.stop(); await naomi.stop()

        let remote = ConflictResolver.custom { $0.remote }
        (molly, naomi, _) = try await scenario(molly: [["who": "molly"]], naomi: [["who": "naomi"]], resolver: remote)
        #expect(try molly.body("doc") == ["who": "naomi"])
        await molly.stop(); await naomi.stop()

        let merge = ConflictResolver.custom { c in
            var d = Document(id: c.documentID)
            let names = [c.local?["who"]?.stringValue, c.remote?["who"]?.stringValue].compactMap { $0 }.sorted()
            d["who"] = .array(names.map { .string($0) })
            return d
        }
        (molly, naomi, _) = try await scenario(molly: [["who": "molly"]], naomi: [["who": "naomi"]], resolver: merge)
        #expect(try naomi.body("doc") == ["who": ["molly", "naomi"]])
        await molly.stop(); await naomi.stop()

        let delete = ConflictResolver.custom { _ in nil }
        (molly, naomi, _) = try await scenario(molly: [["who": "molly"]], naomi: [["who": "naomi"]], resolver: delete)
        #expect(try naomi.db.document("doc") == nil)
        #expect(try naomi.db.document("doc", includeDeleted: true)?.isDeleted == true)
        await molly.stop(); await naomi.stop()
    }

    /// Molly and Naomi share "doc", then each edits it apart: the next sync meets a conflict.
    func divergedPair() async throws -> (molly: Peer, naomi: Peer) {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        try molly.put("doc", ["v": 0])
        try await replicate(molly, with: naomi)
        try molly.put("doc", ["v": "molly"])
        try naomi.put("doc", ["v": "naomi"])
        return (molly, naomi)
    }

    @Test func failingResolverLeavesTheConflictAndReportsIt() async throws {
        struct Nope: Error {}
        let (molly, naomi) = try await divergedPair()
        // A document read from another database, as Couchbase Lite documents it, is an error too.
        let elsewhere = try await Peer.make("elsewhere")
        try elsewhere.put("doc", ["v": "elsewhere"])
        let foreign = try #require(try elsewhere.db.document("doc"))
        for bad in [ConflictResolver.custom { _ in throw Nope() },
                    ConflictResolver.custom { _ in foreign }] {
            var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
            c.conflictResolver = bad
            let r = Replicator(configuration: c)
            let log = EventLog(r)
            try await r.run()
            let events = await log.task.value
            #expect(events.contains { if case .failed = $0.kind { return $0.documentID == "doc" } else { return false } })
            #expect(try molly.db.conflictingRevisions(of: "doc").count == 1, "the conflict stays for the next run")
            #expect(try naomi.body("doc") == ["v": "naomi"])
        }
        // The next run with a working resolver settles it.
        try await replicate(molly, with: naomi)
        #expect(try molly.db.conflictingRevisions(of: "doc").isEmpty)
        #expect(try molly.current("doc") == naomi.current("doc"))
        await molly.stop(); await naomi.stop(); await elsewhere.stop()
    }

    @Test func aResolvedDocumentWithAnotherIDIsSavedUnderTheConflictingID() async throws {
        let renaming = ConflictResolver.custom { c in Document(id: "renamed", properties: ["who": "resolver"]) }
        let (molly, naomi, events) = try await scenario(molly: [["who": "molly"]], naomi: [["who": "naomi"]], resolver: renaming)
        #expect(events.contains { $0.kind == .conflictResolved && $0.documentID == "doc" })
        #expect(try molly.body("doc") == ["who": "resolver"])
        #expect(try naomi.body("doc") == ["who": "resolver"])
        #expect(try molly.db.document("renamed") == nil && naomi.db.document("renamed") == nil, "nothing saved under the other ID")
        await molly.stop(); await naomi.stop()
    }

    @Test(.timeLimit(.minutes(5))) func stopResolvesPendingConflictsBeforeItReturns() async throws {
        struct NotYet: Error {}
        let (molly, naomi) = try await divergedPair()
        let refusing = Mutex(true)
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.continuous = true
        c.conflictResolver = .custom { conflict in
            if refusing.withLock({ $0 }) { throw NotYet() }
            return conflict.local
        }
        let r = Replicator(configuration: c)
        let events = r.documentEvents()
        r.start()
        // The continuous replication met the conflict and the resolver refused it: it stays.
        for await e in events {
            if case .failed = e.kind, e.documentID == "doc" { break }
        }
        #expect(try molly.db.conflictingRevisions(of: "doc").count == 1)
        refusing.withLock { $0 = false }
        await r.stop()
        #expect(try molly.db.conflictingRevisions(of: "doc").isEmpty, "stop() resolved the pending conflict")
        #expect(try molly.body("doc") == ["v": "molly"])
        await molly.stop(); await naomi.stop()
    }
}

/// Two lives of one document — created, deleted; created again elsewhere, deleted again — end
/// as two tombstones, and only one can be the current revision. The other must still reach a
/// peer that holds its life live, or that peer keeps the document for ever.
@Suite("Two lives of a document")
struct TwoLivesTests {
    /// Naomi ends with both lives deleted, her current tombstone being the *first* life's;
    /// Molly holds the second life live. Whichever way they sync, Molly ends deleted.
    @Test(arguments: [ReplicatorConfiguration.ReplicatorType.pull, .push])
    func theOtherLifesTombstoneReachesAPeerWhereThatLifeIsLive(_ type: ReplicatorConfiguration.ReplicatorType) async throws {
        for attempt in 0..<20 {
            let molly = try await Peer.make("molly")
            let naomi = try await Peer.make("naomi", serving: true)
            try molly.put("doc", ["life": "second"])
            let first = try naomi.put("doc", ["life": "first", "attempt": .int(Int64(attempt))])
            let firstTombstone = try naomi.db.delete(first)
            // The second life reaches Naomi (a re-creation beside her tombstone) and is deleted.
            try await replicate(molly, with: naomi, .push)
            let second = try #require(try naomi.db.document("doc"))
            #expect(second.properties == ["life": "second"])
            try naomi.db.delete(second)
            // Only a run where the first life's tombstone is current shows the case.
            guard try naomi.current("doc") == firstTombstone.revisionID?.description else {
                await molly.stop(); await naomi.stop()
                continue
            }
            if type == .pull {
                try await replicate(molly, with: naomi, .pull)
            } else {
                // Naomi pushes to Molly, serving.
                let mollyListener = try await SyncListener.start(serving: ["molly": molly.db], configuration: CheckpointRecoveryTests.listenerConfig(port: 0))
                var c = ReplicatorConfiguration(database: naomi.db, target: mollyListener.url(for: "molly"))
                c.type = .push
                try await Replicator(configuration: c).run()
                await mollyListener.stop()
            }
            #expect(try molly.db.document("doc") == nil, "the second life is deleted at Molly too")
            #expect(try molly.current("doc") == naomi.current("doc"))
            await molly.stop(); await naomi.stop()
            return
        }
        Issue.record("no attempt made the first life's tombstone current")
    }
}

/// A re-creation closes every deletion its copy knows of (seed 115), and those closures must
/// reach a peer that holds one of the deletions open, even when this copy's record of the
/// peer's latest revision is on the other branch. Found by the cluster harness (seed 2).
@Suite("Closed tombstones")
struct ClosedTombstoneTests {
    /// Molly deletes branch B and pushes that deletion to Naomi; she then pulls Naomi's deletion
    /// of branch A (a higher generation: Naomi's latest, as Molly records it) and re-creates
    /// the document on it, closing B's tombstone. The push must close B at Naomi too: left open
    /// there, B's deletion races the re-creation at every peer that pulls from Naomi, and wins.
    @Test func aRecreationClosesAtThePeerTheDeletionItHadPushedThere() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        let olive = try await Peer.make("olive")
        try molly.put("doc", ["v": "shared"])
        try await replicate(molly, with: naomi, .push)
        try molly.put("doc", ["v": "molly"])
        try molly.db.delete(try #require(try molly.db.document("doc")))
        for v in ["a1", "a2", "a3"] { try naomi.put("doc", ["v": .string(v)]) }
        try naomi.db.delete(try #require(try naomi.db.document("doc")))
        let deletionA = try #require(try naomi.current("doc"))

        try await replicate(molly, with: naomi, .push)     // B's deletion: a second tombstone there
        try await replicate(molly, with: naomi, .pull)     // A's deletion: current here too
        #expect(try molly.current("doc") == deletionA)
        let recreated = try molly.put("doc", ["v": "again"])
        try await replicate(molly, with: naomi, .push)

        let tree = try #require(try naomi.db.revisionTree(of: "doc"))
        #expect(!tree.leaves.contains { $0.isDeleted && !$0.isClosed }, "no deletion left open beside the re-creation")
        #expect(try naomi.current("doc") == recreated.revisionID?.description)
        try await replicate(olive, with: naomi, .pull)
        #expect(try olive.body("doc") == ["v": "again"], "a third peer sees the re-creation, not B's deletion")
        await molly.stop(); await naomi.stop(); await olive.stop()
    }
}
