import FerryStore
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

    static func twoWriters() throws -> (Database, Database, TempDir) {
        let dir = TempDir()
        var watching = DatabaseOptions()
        watching.watchExternalWrites = true
        let a = try Database.open(at: dir.path("shared.ferry"), options: watching)
        let b = try Database.open(at: dir.path("shared.ferry"))
        return (a, b, dir)
    }
}
