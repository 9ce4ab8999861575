import FerryBLIP
@testable import FerrySync
import Synchronization
import Testing

/// The pull feed's window over a real BLIP connection: a receiver that holds its replies sees at
/// most `capacity` revisions unanswered, the rest go out as replies free slots, and the window
/// keeps nothing once its feed has ended.
@Suite("RevWindow")
struct RevWindowTests {
    /// The receiving side: holds every `rev` request until told to answer.
    final class Receiver: Sendable {
        let held = Mutex<[BLIPIncomingRequest]>([])
        let most = Atomic<Int>(0)
        let arrived = AsyncStream<Void>.makeStream()

        func take(_ request: BLIPIncomingRequest) {
            let n = held.withLock { $0.append(request); return $0.count }
            _ = most.max(n, ordering: .relaxed)
            arrived.continuation.yield()
        }

        /// Answers every held request (an error response for the ones `refuse` picks).
        func answerAll(refuse: (String) -> Bool = { _ in false }) {
            for r in held.withLock({ h in defer { h = [] }; return h }) {
                if refuse(r.message.properties["id"] ?? "") { r.respondError(domain: "HTTP", code: 403, message: "no") } else { r.respond() }
            }
        }
    }

    static func revs(_ n: Int) -> [BLIPMessage] {
        (0..<n).map { .request(profile: "rev", properties: [("id", "d\($0)"), ("rev", "1-aa")], body: Array("{}".utf8)) }
    }

    @Test func neverMoreThanCapacityUnansweredAndEveryReplyReported() async throws {
        let receiver = Receiver()
        let listener = try await BLIPConnection.listen(app: "test") { conn in
            conn.register(profile: "rev") { receiver.take($0) }
        }
        let conn = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(listener.port)/", app: "test")
        let sentCount = Atomic<Int>(0)
        let results = Mutex<[Int: Bool]>([:])
        let window = RevWindow(capacity: 4, connection: conn) { sentCount.add($0, ordering: .relaxed) }
        window.send(Self.revs(10)) { i, r in
            results.withLock { $0[i] = (try? r.get()) != nil }
        }
        var arrivals = receiver.arrived.stream.makeAsyncIterator()
        var seen = 0
        while seen < 10 {
            // Wait for the window's worth, then answer it: the next ones may go out.
            while receiver.held.withLock({ $0.count }) < min(4, 10 - seen) { _ = await arrivals.next() }
            seen += receiver.held.withLock { $0.count }
            receiver.answerAll(refuse: { $0 == "d7" })
        }
        try await window.drain()
        #expect(receiver.most.load(ordering: .relaxed) == 4)
        #expect(sentCount.load(ordering: .relaxed) == 10)
        let r = results.withLock { $0 }
        #expect(r.count == 10)
        #expect(r.filter { !$0.value }.map(\.key) == [7])
        await conn.close()
        await listener.close()
    }

    @Test func anEndedFeedDropsItsQueueAndIsReleased() async throws {
        let receiver = Receiver()
        let listener = try await BLIPConnection.listen(app: "test") { conn in
            conn.register(profile: "rev") { receiver.take($0) }
        }
        let conn = try await BLIPConnection.connect(to: "ws://127.0.0.1:\(listener.port)/", app: "test")
        weak var released: RevWindow?
        do {
            let window = RevWindow(capacity: 2, connection: conn) { _ in }
            released = window
            window.send(Self.revs(6)) { _, _ in _ = window }   // a handler that holds the window
            var arrivals = receiver.arrived.stream.makeAsyncIterator()
            while receiver.held.withLock({ $0.count }) < 2 { _ = await arrivals.next() }
            window.close()
            await #expect(throws: ReplicationError.stopped) { try await window.waitForRoom() }
            window.send(Self.revs(1)) { _, _ in }              // after the end: not queued
            receiver.answerAll()
        }
        // The two answered replies come back; nothing else is sent, and nothing holds the window.
        await conn.close()
        #expect(receiver.held.withLock { $0.count } == 0)
        #expect(receiver.most.load(ordering: .relaxed) == 2)
        #expect(released == nil)
        await listener.close()
    }
}
