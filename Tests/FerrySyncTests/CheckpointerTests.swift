import FerryStore
@testable import FerrySync
import FerryTestSupport
import Testing

/// Pushed progress is saved at most once a second while a push runs, at once when it has
/// caught up, and whatever is left when the session ends.
@Suite struct CheckpointerTests {
    @Test func pushedProgressIsSavedWhenSettledOrDueAndFlushedAtTheEnd() throws {
        let dir = TempDir()
        let db = try Database.open(at: dir.path("cp.ferry"))
        let cp = Checkpointer(configuration: ReplicatorConfiguration(database: db, target: "ws://peer/db"))
        func saved() throws -> Int64? { try db.localDocument(cp.localDocumentID)?.properties["local"]?.intValue }

        #expect(try cp.recordPushed(upTo: 10, settled: false))      // the first save is due at once
        #expect(try saved() == 10)
        #expect(try !cp.recordPushed(upTo: 20, settled: false))     // within a second: memory only
        #expect(cp.value.local == 20)
        #expect(try saved() == 10)
        try cp.flushPushed()
        #expect(try saved() == 20)
        try db.putLocalDocument(cp.localDocumentID, properties: ["local": 0])
        try cp.flushPushed()                                        // nothing left to write
        #expect(try saved() == 0)
        #expect(try cp.recordPushed(upTo: 30, settled: true))       // caught up: saved at once
        #expect(try saved() == 30)
    }
}
