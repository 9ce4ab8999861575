/// A live, endless sequence of changes after a starting sequence, for continuous replication.
/// Pull-driven: it reads committed changes in pages and, once caught up, waits for the next
/// commit. Ends (returns nil) when the task is cancelled or the database is closed.
public struct LiveChanges: AsyncSequence, Sendable {
    public typealias Element = Change
    public typealias Failure = StoreError

    let database: Database
    let since: Int64
    let pageSize: Int

    /// Iterates the changes.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let database: Database
        var position: Int64
        let pageSize: Int
        var buffer: [Change] = []
        var index = 0

        public mutating func next() async throws(StoreError) -> Change? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(StoreError) -> Change? {
            while true {
                if index < buffer.count {
                    let c = buffer[index]
                    index += 1
                    position = c.sequence
                    return c
                }
                if Task.isCancelled { return nil }
                do {
                    buffer = try database.changes(since: position, limit: pageSize)
                } catch .closed {
                    return nil
                }
                index = 0
                if !buffer.isEmpty { continue }
                guard await database.writer.notifier.wait(after: position) else { return nil }
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(database: database, position: since, pageSize: pageSize)
    }
}
