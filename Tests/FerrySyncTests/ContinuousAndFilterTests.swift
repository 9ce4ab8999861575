import FerryStore
@testable import FerrySync
import Testing

/// Waits on a database's live change feed (no polling, no sleeps) until `id` shows `revision`.
func waitFor(_ db: Database, _ id: String, revision: String?, since: Int64 = 0) async throws {
    for try await change in db.liveChanges(since: since) where change.documentID == id {
        if revision == nil || change.revisionID.description == revision { return }
    }
}

@Suite("Continuous replication, filters, validation")
struct ContinuousAndFilterTests {
    @Test func continuousPropagatesNewChangesBothWays() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        try molly.put("before", ["v": 1])
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.continuous = true
        let r = Replicator(configuration: c)
        let statuses = r.statusChanges()
        r.start()
        try await waitFor(naomi.db, "before", revision: nil)
        // Idle once caught up.
        for await s in statuses where s.activity == .idle { break }

        let m = try molly.put("from-molly", ["at": "molly"])
        try await waitFor(naomi.db, "from-molly", revision: m.revisionID?.description)
        let n = try naomi.put("from-naomi", ["at": "naomi"])
        try await waitFor(molly.db, "from-naomi", revision: n.revisionID?.description)
        // An edit of a replicated document travels back as a fast-forward.
        let e = try naomi.put("from-molly", ["at": "molly", "seen": true])
        try await waitFor(molly.db, "from-molly", revision: e.revisionID?.description)
        #expect(try molly.body("from-molly") == ["at": "molly", "seen": true])

        await r.stop()
        #expect(r.status.activity == .stopped)
        #expect(r.status.lastError == nil)
        await molly.stop(); await naomi.stop()
    }

    @Test func pushFilterWithParametersAndDocumentIDs() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        for i in 0..<10 { try molly.put("t\(i)", ["type": i % 2 == 0 ? "task" : "note"]) }
        try await replicate(molly, with: naomi, .push) { c in
            c.pushFilter = { doc, _, params in doc["type"] == params["type"] }
            c.pushFilterParameters = ["type": "task"]
        }
        #expect(try naomi.db.documentCount() == 5)
        #expect(try naomi.db.document("t1") == nil)

        try await replicate(molly, with: naomi, .push) { c in c.documentIDs = ["t1", "t3"] }
        #expect(try naomi.db.documentCount() == 7)
        #expect(try naomi.db.document("t5") == nil)
        await molly.stop(); await naomi.stop()
    }

    @Test func namedPullFilterWithParametersAndFilteredDeletion() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        let listener = try #require(naomi.listener)
        listener.registerPullFilter("byOwner") { doc, _, params in doc["owner"]?.stringValue == params["owner"] }
        for i in 0..<6 { try naomi.put("d\(i)", ["owner": i < 3 ? "molly" : "naomi"]) }
        let pull: (inout ReplicatorConfiguration) -> Void = { c in
            c.pullFilter = "byOwner"
            c.pullFilterParameters = ["owner": "molly"]
        }
        try await replicate(molly, with: naomi, .pull, configure: pull)
        #expect(try molly.db.documentCount() == 3)
        #expect(try molly.db.document("d4") == nil)

        // A deletion that keeps the filtered field still passes the filter.
        var d1 = try #require(try naomi.db.document("d1"))
        d1.properties = ["owner": "molly", "_deleted": true]
        try naomi.db.save(d1)
        try await replicate(molly, with: naomi, .pull, configure: pull)
        #expect(try molly.db.document("d1") == nil)
        #expect(try molly.db.document("d1", includeDeleted: true)?.isDeleted == true)
        #expect(try molly.db.documentCount() == 2)

        // An unknown filter name is refused by the peer.
        await #expect(throws: ReplicationError.self) {
            try await replicate(molly, with: naomi, .pull) { c in c.pullFilter = "nope" }
        }
        await molly.stop(); await naomi.stop()
    }

    /// Ferry's `_selector` pull filter over BLIP: the serving peer sends exactly the documents
    /// the Mango selector matches (deletions included when they still match), and refuses a
    /// selector CouchDB would refuse.
    @Test func selectorPullOverBLIP() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        for i in 0..<10 { try naomi.put("d\(i)", ["n": .int(Int64(i)), "tags": i % 3 == 0 ? ["x"] : ["y"]]) }
        let json: JSONValue = ["n": ["$gte": 4], "tags": ["$elemMatch": ["$eq": "x"]]]
        try await replicate(molly, with: naomi, .pull) { c in c.selector = json }
        let expected = try naomi.db.find(MangoQuery(selector: try MangoSelector(json: json))).documents.map(\.id)
        #expect(expected == ["d6", "d9"])
        #expect(try molly.db.allDocuments(limit: 100).map(\.id) == expected)
        await #expect(throws: ReplicationError.self) {
            try await replicate(molly, with: naomi, .pull) { c in c.selector = ["n": ["$bogus": 1]] }
        }
        await molly.stop(); await naomi.stop()
    }

    @Test func selectorPushSendsOnlyMatchingDocuments() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        for i in 0..<10 { try molly.put("d\(i)", ["n": .int(Int64(i)), "kind": i % 2 == 0 ? "even" : "odd"]) }
        let json: JSONValue = ["kind": "even", "n": ["$lt": 7]]
        try await replicate(molly, with: naomi, .push) { c in c.selector = json }
        let expected = try molly.db.find(MangoQuery(selector: try MangoSelector(json: json))).documents.map(\.id)
        #expect(expected == ["d0", "d2", "d4", "d6"])
        #expect(try naomi.db.allDocuments(limit: 100).map(\.id) == expected)
        // A selector Mango refuses stops the replication before anything is pushed.
        try molly.put("late", ["kind": "even", "n": 1])
        await #expect(throws: ReplicationError.store(.invalidArgument("bad selector: Invalid operator: $bogus"))) {
            try await replicate(molly, with: naomi, .push) { c in c.selector = ["n": ["$bogus": 1]] }
        }
        #expect(try naomi.db.document("late") == nil)
        await molly.stop(); await naomi.stop()
    }

    @Test func rejectedDocumentsAreReportedAndTheRestArrive() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        naomi.db.setValidation(named: "noSecrets") { rev, _ in
            rev.properties["secret"] != nil ? .reject(message: "secrets stay home") : .accept
        }
        for i in 0..<20 { try molly.put("doc\(i)", i % 5 == 0 ? ["secret": "x"] : ["ok": true]) }
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.type = .push
        let r = Replicator(configuration: c)
        let log = EventLog(r)
        try await r.run()
        let failures = await log.task.value.filter { if case .failed = $0.kind { return true } else { return false } }
        #expect(Set(failures.map(\.documentID)) == ["doc0", "doc5", "doc10", "doc15"])
        #expect(failures.allSatisfy { $0.kind == .failed(.remote(domain: "HTTP", code: 403, message: "secrets stay home")) })
        #expect(try naomi.db.documentCount() == 16)
        #expect(r.status.lastError == nil)
        await molly.stop(); await naomi.stop()
    }

    @Test func pulledRevisionsRejectedLocallyAreReported() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        molly.db.setValidation(named: "small") { rev, _ in
            (rev.properties["size"]?.intValue ?? 0) > 10 ? .reject(message: "too big", status: 403) : .accept
        }
        for i in 0..<12 { try naomi.put("n\(i)", ["size": .int(Int64(i))]) }
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.type = .pull
        let r = Replicator(configuration: c)
        let log = EventLog(r)
        try await r.run()
        let failed = await log.task.value.filter { if case .failed = $0.kind { return true } else { return false } }
        #expect(failed.map(\.documentID) == ["n11"])
        #expect(try molly.db.documentCount() == 11)
        await molly.stop(); await naomi.stop()
    }
}
