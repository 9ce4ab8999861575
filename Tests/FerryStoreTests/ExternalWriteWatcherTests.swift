@testable import FerryStore
import FerryTestSupport
import Testing

/// `DatabaseOptions.watchExternalWrites`: commits made to the file by another writer (here a
/// second `Database` on it, which has its own connection and writer) wake this one's change feed.
@Suite struct ExternalWriteWatcherTests {
    @Test func aCommitByAnotherWriterWakesTheFeed() async throws {
        let (a, b, dir) = try Self.twoWriters()
        defer { a.close(); b.close(); withExtendedLifetime(dir) {} }
        let external = try b.save(Document(id: "ext", properties: [:]))
        #expect(try await eventually(30) { a.lastSequence >= external.sequence })
    }

    /// Right after a burst of its own commits the watcher looks less often; a commit by the other
    /// writer then, with nothing written after it, is still seen.
    @Test func aCommitByAnotherWriterRightAfterABurstOfOwnCommitsWakesTheFeed() async throws {
        let (a, b, dir) = try Self.twoWriters()
        defer { a.close(); b.close(); withExtendedLifetime(dir) {} }
        for i in 0..<300 { try a.save(Document(id: "own\(i)", properties: ["i": .int(Int64(i))])) }
        let external = try b.save(Document(id: "ext", properties: [:]))
        #expect(try await eventually(30) { a.lastSequence >= external.sequence })
        #expect(try a.document("ext") != nil)
    }

    /// While this process commits, the WAL is not watched (each own transaction catches up
    /// with other writers' commits as it begins); the watch comes back once the commits stop, and
    /// sees a commit by the other writer made after that.
    @Test func theWatchIsRemovedWhileThisProcessCommitsAndComesBack() async throws {
        let (a, b, dir) = try Self.twoWriters()
        defer { a.close(); b.close(); withExtendedLifetime(dir) {} }
        let watcher = try #require(a.watcher)
        #expect(watcher.isWatching)
        // A burst of commits, until the watcher (on its own thread) has taken them for this
        // process's: a fixed count would race it.
        var unwatched = false
        let deadline = ContinuousClock.now + .seconds(30)
        var i = 0
        while !unwatched && ContinuousClock.now < deadline {
            i += 1
            try a.save(Document(id: "own\(i)", properties: [:]))
            unwatched = !watcher.isWatching
        }
        #expect(unwatched)
        #expect(try await eventually(30) { watcher.isWatching })
        let external = try b.save(Document(id: "ext", properties: [:]))
        #expect(try await eventually(30) { a.lastSequence >= external.sequence })
    }

    static func twoWriters() throws -> (Database, Database, TempDir) {
        let dir = TempDir()
        var watching = DatabaseOptions()
        watching.watchExternalWrites = true
        let a = try Database.open(at: dir.path("shared.ferry"), options: watching)
        let b = try Database.open(at: dir.path("shared.ferry"))
        return (a, b, dir)
    }
}
