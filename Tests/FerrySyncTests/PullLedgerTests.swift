import FerryStore
@testable import FerrySync
import Testing

@Suite("One ledger per pull: each requested revision's state drives the gate, the checkpoint and the caught-up signal")
struct PullLedgerTests {
    typealias Key = (documentID: String, revisionID: String)
    static func keys(_ n: Int) -> [Key] { (0..<n).map { ("doc-\($0)", "1-a") } }

    @Test(.timeLimit(.minutes(5))) func aWaiterPassesOnlyOnceEnoughAreDone() async {
        let ledger = PullLedger(limit: 2)
        ledger.requested(Self.keys(4), sequences: nil, wanted: [true, true, true, true])
        let passed = await Self.waiter(at: ledger)
        ledger.arrived()
        ledger.ended()
        #expect(ledger.waitingForRoom == 1, "3 pending, limit 2: still waiting")
        _ = ledger.withdrawn(("doc-1", "1-a"), arrived: false, keepOpen: false)
        #expect(await passed.value == true)
        #expect(ledger.waitingForRoom == 0 && ledger.pending == 2)
        #expect(await ledger.waitForRoom() == true, "at the limit: room")
    }

    @Test(.timeLimit(.minutes(5))) func closingTellsWaitersAndLaterOnesThePullIsEnding() async {
        let ledger = PullLedger(limit: 1)
        ledger.requested(Self.keys(5), sequences: nil, wanted: Array(repeating: true, count: 5))
        let waiting = await Self.waiter(at: ledger)
        ledger.close()
        #expect(await waiting.value == false)
        #expect(await ledger.waitForRoom() == false)
        #expect(ledger.pending == 5)
    }

    @Test func aRevisionNeverAskedForCannotOpenTheGateEarly() {
        let ledger = PullLedger(limit: 1)
        _ = ledger.withdrawn(nil, arrived: false, keepOpen: false)
        ledger.ended()
        #expect(ledger.pending == 0)
        ledger.requested(Self.keys(2), sequences: nil, wanted: [true, true])
        #expect(ledger.pending == 2, "the stray ends were not banked")
    }

    @Test func aRevisionIsOnTheWayUntilItArrivesAndPendingUntilItEnds() {
        let ledger = PullLedger(limit: 10)
        ledger.requested(Self.keys(3), sequences: nil, wanted: [true, false, true])
        #expect(ledger.onTheWay == 2 && ledger.pending == 2)
        ledger.arrived()
        #expect(ledger.onTheWay == 1 && ledger.pending == 2, "arrived, not stored: still pending")
        ledger.ended()
        #expect(ledger.onTheWay == 1 && ledger.pending == 1)
    }

    @Test func theCheckpointStopsBeforeTheFirstEntryNotDone() {
        let ledger = PullLedger(limit: 10)
        let keys: [Key] = [("a", "1-a"), ("b", "1-b"), ("c", "1-c")]
        let standing = ledger.requested(keys, sequences: [.int(1), .int(2), .int(3)], wanted: [false, true, true])
        #expect(ledger.checkpoint == .int(1), "the known first entry is done at once")
        #expect(standing.checkpointBehind)
        #expect(ledger.stored([("c", "1-c")]) == .int(1), "c is done but b is not: still 1")
        #expect(ledger.stored([("b", "1-b")]) == .int(3))
        #expect(ledger.stored([]) == nil, "already handed to a transaction")
    }

    @Test func aFailureThatMayPassKeepsItsEntryOpenAndNoLaterTransactionWritesTheCheckpoint() {
        let ledger = PullLedger(limit: 10)
        let keys: [Key] = [("a", "1-a"), ("b", "1-b")]
        ledger.requested(keys, sequences: [.string("s1"), .string("s2")], wanted: [true, true])
        ledger.arrived()
        _ = ledger.withdrawn(("a", "1-a"), arrived: true, keepOpen: true)
        #expect(ledger.checkpoint == nil)
        ledger.storeFailed()
        #expect(ledger.stored([("b", "1-b")]) == nil)
    }

    @Test(.timeLimit(.minutes(5))) func aOneShotWaiterReturnsOnceCaughtUpAndEverythingEnded() async {
        let ledger = PullLedger(limit: 10)
        ledger.requested(Self.keys(1), sequences: [.int(7)], wanted: [true])
        let done = Task { await ledger.waitUntilDone(continuous: false) }
        #expect(ledger.caughtUp().idle == false, "one revision still on its way")
        ledger.arrived()
        _ = ledger.stored([("doc-0", "1-a")])
        #expect(ledger.ended().idle)
        #expect(await done.value == nil)
    }

    @Test(.timeLimit(.minutes(5))) func anErrorEndsEveryWaiterWithIt() async {
        let ledger = PullLedger(limit: 10)
        let continuous = Task { await ledger.waitUntilDone(continuous: true) }
        ledger.end(with: .protocolError("bad"))
        ledger.end(with: .stopped)
        #expect(await continuous.value == .protocolError("bad"), "the first error is kept")
    }

    @Test(.timeLimit(.minutes(5))) func aPullAllowedOnePendingRevisionStillCopiesEverything() async throws {
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

    /// A task waiting for room at `ledger`, returned once its wait is registered.
    static func waiter(at ledger: PullLedger) async -> Task<Bool, Never> {
        let task = Task { await ledger.waitForRoom() }
        while ledger.waitingForRoom == 0 { await Task.yield() }
        return task
    }
}
