import FerryStore
@testable import FerrySync
import Testing

@Suite("A puller stops answering changes while too many revisions wait to be stored")
struct PendingRevisionsTests {
    @Test func aWaiterPassesOnlyOnceEnoughAreStored() async {
        let gate = PendingRevisions(limit: 2)
        for _ in 0..<4 { gate.received() }
        let passed = Task { await gate.waitForRoom(); return gate.count }
        gate.finished()
        // 3 pending: still over the limit; the waiter is released by the next one only, so it
        // sees at most 2 (never 3 or 4).
        gate.finished()
        #expect(await passed.value <= 2)
        await gate.waitForRoom()
    }

    @Test func closingReleasesWaitersAndLaterOnes() async {
        let gate = PendingRevisions(limit: 1)
        for _ in 0..<5 { gate.received() }
        let waiting = Task { await gate.waitForRoom() }
        gate.close()
        await waiting.value
        await gate.waitForRoom()
        #expect(gate.count == 5)
    }

    @Test func aPullWithOnePendingRevisionStillCopiesEverything() async throws {
        let molly = try await Peer.make("molly")
        let naomi = try await Peer.make("naomi", serving: true)
        for i in 0..<400 { try naomi.put("doc-\(i)", ["n": .int(Int64(i))]) }
        var c = ReplicatorConfiguration(database: molly.db, target: naomi.url)
        c.type = .pull
        c.batchSize = 25
        c.maxConcurrentRevisions = 1
        let r = Replicator(configuration: c)
        try await r.run()
        #expect(try molly.db.documentCount() == 400)
        #expect(try molly.body("doc-399") == ["n": 399])
        #expect(r.status.progress.completed == r.status.progress.total)
        await molly.stop(); await naomi.stop()
    }
}
