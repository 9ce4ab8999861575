import FerryStore
@testable import FerrySync
import FerryTestSupport
import Testing

/// Pushed progress is saved at most once a second while a push runs, at once when it has
/// caught up, and whatever is left when the session ends.
@Suite struct CheckpointerTests {
    @Test func pushedProgressIsSavedWhenSettledOrDueAndFlushedAtTheEnd() async throws {
        let dir = TempDir()
        let db = try Database.open(at: dir.path("cp.ferry"))
        // An hour between saves, so "within the interval" holds however slow a busy machine is.
        let cp = Checkpointer(configuration: ReplicatorConfiguration(database: db, target: "ws://peer/db"), pushSaveInterval: .seconds(3600))
        func saved() throws -> Int64? { try db.localDocument(cp.localDocumentID)?.properties["local"]?.intValue }

        #expect(try await cp.recordPushed(upTo: 10, settled: false))      // the first save is due at once
        #expect(try saved() == 10)
        #expect(try await !cp.recordPushed(upTo: 20, settled: false))     // within the interval: memory only
        #expect(cp.value.local == 20)
        #expect(try saved() == 10)
        try await cp.flushPushed()
        #expect(try saved() == 20)
        try db.putLocalDocument(cp.localDocumentID, properties: ["local": 0])
        try await cp.flushPushed()                                        // nothing left to write
        #expect(try saved() == 0)
        #expect(try await cp.recordPushed(upTo: 30, settled: true))       // caught up: saved at once
        #expect(try saved() == 30)
    }
}
