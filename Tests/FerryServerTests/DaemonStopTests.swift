import FerryBLIP
import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// `FerryDaemon.stop()` with a replication client that has stopped reading: its close frame
/// can never be answered, so the stop must not wait on it past its deadline.
@Suite("daemon stop: a client that stopped reading")
struct DaemonStopTests {
    /// A client subscribed to a feed of 2,000 changes stops reading. The daemon's stop is given
    /// a grace period far longer than the test's time limit, then cancelled (what a service
    /// group does at its shutdown deadline): the stop returns, having dropped the client, and
    /// the database it served is closed.
    @Test(.timeLimit(.minutes(2)))
    func cancellingTheStopDropsAClientThatStoppedReading() async throws {
        let f = try await DaemonFixture(allowAnonymous: true, databases: ["db"]) { $0.shutdownGracePeriod = 600 }
        let served = try #require(f.daemon.registry.database("db"))
        try served.inBatch { (b) throws(StoreError) in
            for i in 0..<2_000 { try b.save(Document(id: "doc-\(i)", properties: ["i": .int(Int64(i))])) }
        }
        let client = try await BLIPConnection.connect(to: f.daemon.replicationURL(for: "db") + "/_blipsync", app: "CBMobile_3",
                                                      webSocket: DaemonFixture.patientReplicationWebSocket)
        client.pauseReading()
        // The server counts the client once its side of the upgrade has run, which may be just
        // after the client's side returned.
        while f.daemon.replicationClientCount == 0 { await Task.yield() }
        // The subscription's answer never arrives (the client does not read); the feed's
        // `changes` requests pile up unread behind it.
        let subscription = Task { try? await client.send(.request(profile: "subChanges", properties: BLIPProperties([("batch", "200")]))) }

        let stopping = Task { await f.daemon.stop() }
        stopping.cancel()
        await stopping.value
        #expect(throws: StoreError.self) { try served.document("doc-0") }

        // The client, reading again, finds its connection closed.
        client.resumeReading()
        _ = await client.closed()
        _ = await subscription.value
    }
}
