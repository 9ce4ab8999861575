/// A Mango query kept current (Couchbase Lite's live query): an endless sequence of result
/// sets, the first at once, then one each time a committed change alters the result — the
/// documents, their order or any of their revisions. Commits that leave the result as it was
/// emit nothing; commits made while a result is being computed are taken in by the next one.
/// Ends (nil) when the task is cancelled or the database is closed.
///
/// ```swift
/// for try await update in db.liveQuery(query) { show(update.documents) }
/// ```
public struct LiveQuery: AsyncSequence, Sendable {
    /// One result set.
    public struct Update: Sendable {
        /// The documents the query answers now.
        public var documents: [Document]
        /// The database's last sequence when the query ran: the result includes every change
        /// up to it.
        public var sequence: Int64
    }

    public typealias Element = Update
    public typealias Failure = any Error

    let database: Database
    let query: MangoQuery

    /// Iterates the result sets.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let database: Database
        let query: MangoQuery
        var seen: Int64?
        var last: [String]?

        public mutating func next() async throws -> Update? {
            while true {
                if let seen {
                    guard await database.writer.notifier.wait(after: seen) else { return nil }
                }
                if Task.isCancelled { return nil }
                // The sequence first: the query then sees at least every commit up to it.
                let sequence = database.lastSequence
                seen = sequence
                let documents: [Document]
                do {
                    documents = try database.find(query).documents
                } catch StoreError.closed {
                    return nil
                }
                let identity = documents.map { $0.id + "\u{0}" + ($0.revisionID?.description ?? "") }
                if identity == last { continue }
                last = identity
                return Update(documents: documents, sequence: sequence)
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(database: database, query: query)
    }
}

extension Database {
    /// `query`'s result now and after every commit that changes it; see `LiveQuery`.
    public func liveQuery(_ query: MangoQuery) -> LiveQuery {
        LiveQuery(database: self, query: query)
    }
}
