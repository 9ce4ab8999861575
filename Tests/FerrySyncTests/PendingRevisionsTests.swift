import FerryStore
@testable import FerrySync
import Testing

@Suite("A puller takes no more changes while too many revisions it asked for are not stored")
struct PendingRevisionsTests {
    @Test(.timeLimit(.minutes(1))) func aWaiterPassesOnlyOnceEnoughAreDone() async {
        let gate = PendingRevisions(limit: 2)
        gate.requested(4)
        let passed = await Self.waiter(at: gate)
        gate.finished()
        #expect(gate.waiting == 1, "3 pending, limit 2: still waiting")
        gate.finished()
        #expect(await passed.value == true)
        #expect(gate.waiting == 0 && gate.count == 2)
        #expect(await gate.waitForRoom() == true, "at the limit: room")
    }

    @Test(.timeLimit(.minutes(1))) func closingTellsWaitersAndLaterOnesThePullIsEnding() async {
        let gate = PendingRevisions(limit: 1)
        gate.requested(5)
        let waiting = await Self.waiter(at: gate)
        gate.close()
        #expect(await waiting.value == false)
        #expect(await gate.waitForRoom() == false)
        #expect(gate.count == 5)
    }

    @Test func aRevisionNeverAskedForCannotOpenTheGateEarly() {
        let gate = PendingRevisions(limit: 1)
        gate.finished()
        gate.finished()
        #expect(gate.count == 0)
        gate.requested(2)
        #expect(gate.count == 2, "the stray finishes were not banked")
    }

    @Test(.timeLimit(.minutes(1))) func aPullAllowedOnePendingRevisionStillCopiesEverything() async throws {
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

    /// A task waiting for room at `gate`, returned once its wait is registered.
    static func waiter(at gate: PendingRevisions) async -> Task<Bool, Never> {
        let task = Task { await gate.waitForRoom() }
        while gate.waiting == 0 { await Task.yield() }
        return task
    }
}
