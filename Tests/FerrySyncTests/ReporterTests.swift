import FerryStore
@testable import FerrySync
import Synchronization
import Testing

@Suite("Document events are counted always and built only for listeners")
struct ReporterTests {
    @Test func eventsAreBuiltOnlyWhenSomeoneListens() {
        let broadcaster = Broadcaster<DocumentEvent>()
        let built = Atomic<Int>(0)
        let reporter = Reporter(onEvent: { broadcaster.send($0) }, wantsEvents: { !broadcaster.isEmpty })
        func event(_ i: Int) -> DocumentEvent {
            built.add(1, ordering: .relaxed)
            return DocumentEvent(direction: .push, documentID: "d\(i)", revisionID: "1-a", isDeleted: false, kind: .pushed)
        }
        reporter.events(.pushed, count: 3, event)
        #expect(built.load(ordering: .relaxed) == 0)
        #expect(reporter.count(of: .pushed) == 3)

        let seen = Atomic<Int>(0)
        let token = broadcaster.addCallback { _ in seen.add(1, ordering: .relaxed) }
        reporter.events(.pushed, count: 2, event)
        #expect(built.load(ordering: .relaxed) == 2)
        #expect(seen.load(ordering: .relaxed) == 2)
        #expect(reporter.count(of: .pushed) == 5)

        broadcaster.removeCallback(token)
        broadcaster.removeCallback(token)   // a second removal must not count twice
        #expect(broadcaster.isEmpty)
        reporter.events(.pushed, count: 1, event)
        #expect(built.load(ordering: .relaxed) == 2)
    }

    @Test func endedAndDroppedStreamsLeaveTheBroadcasterEmpty() {
        let broadcaster = Broadcaster<Int>()
        var stream: AsyncStream<Int>? = broadcaster.stream()
        _ = broadcaster.stream()
        #expect(!broadcaster.isEmpty)
        broadcaster.endStreams()
        #expect(broadcaster.isEmpty)
        stream = broadcaster.stream()
        #expect(!broadcaster.isEmpty)
        stream = nil
        _ = stream
        #expect(broadcaster.isEmpty)
    }
}

@Suite("The pull window keeps its checkpoint across compactions")
struct SequenceWindowCompactionTests {
    @Test func entriesStillCompleteAfterTheWindowCompacts() {
        var w = SequenceWindow()
        let n = 10_000
        for i in 0..<n { w.add(documentID: "d\(i)", revisionID: "1-a", sequence: .int(Int64(i)), done: false) }
        // Done in order up to 6,000 (the window compacts past 4,096), then one far ahead.
        for i in 0..<6_000 { let ok = w.complete(documentID: "d\(i)", revisionID: "1-a"); #expect(ok) }
        #expect(w.checkpoint == .int(5_999))
        let ahead = w.complete(documentID: "d9000", revisionID: "1-a")
        #expect(ahead)
        #expect(w.checkpoint == .int(5_999))
        for i in 6_000..<n where i != 9_000 { let ok = w.complete(documentID: "d\(i)", revisionID: "1-a"); #expect(ok) }
        #expect(w.checkpoint == .int(Int64(n - 1)))
        #expect(w.isEmpty)
        let again = w.complete(documentID: "d0", revisionID: "1-a")
        #expect(!again)
    }
}
