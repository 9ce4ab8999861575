import FerryStore

/// The lines of a `feed=continuous` or `feed=eventsource` answer, made one at a time as the
/// connection asks for the next (`AsyncStream(unfolding:)`): a feed is never further ahead of
/// its client than one line plus the connection's output buffer. Rows are read from the
/// database a batch at a time; once caught up it waits for the next commit, sending a
/// heartbeat each `heartbeat` seconds, and ends after `timeout` with nothing to send.
/// Cancelling the consuming task ends the wait and the feed.
actor ContinuousChangesFeed {
    private let db: Database
    private let query: RESTRouter.ChangesQuery
    private let eventSource: Bool
    /// Every change up to here was sent (or filtered out): what `last_seq` says.
    private var position: Int64
    /// Every change up to here was read into `pending`.
    private var scanned: Int64
    private var sent = 0
    /// Rows read but not yet sent.
    private var pending: [(row: JSONValue, sequence: Int64)] = []
    private var pendingIndex = 0
    private var ended = false

    init(db: Database, query: RESTRouter.ChangesQuery, eventSource: Bool) {
        self.db = db
        self.query = query
        self.eventSource = eventSource
        position = query.since
        scanned = query.since
    }

    /// The next piece to send, or nil when the feed is over.
    func next() async -> [UInt8]? {
        while !ended {
            if Task.isCancelled { return finish() }
            if pendingIndex < pending.count {
                let (row, sequence) = pending[pendingIndex]
                pendingIndex += 1
                position = pendingIndex == pending.count ? scanned : sequence
                sent += 1
                if sent >= query.limit {
                    position = sequence
                    ended = true
                    return line(row, sequence) + lastSequence()
                }
                return line(row, sequence)
            }
            position = scanned
            let batch: [Change]
            do { batch = try db.changes(since: scanned, limit: 500) } catch { return finish() }
            if !batch.isEmpty {
                pending = []
                pendingIndex = 0
                for change in batch {
                    scanned = change.sequence
                    if let row = try? RESTRouter.changeRow(db, change, query) { pending.append((row, change.sequence)) }
                }
                continue
            }
            // Caught up: wait for the next commit, a heartbeat, or the end.
            let changed = await RESTRouter.waitOrTimeout(db, after: scanned, seconds: query.heartbeat ?? query.timeout ?? 60)
            if Task.isCancelled { return finish() }
            if !changed {
                guard query.heartbeat != nil else { return finish() }
                return eventSource ? Array("event: heartbeat\ndata: \n\n".utf8) : [10]
            }
        }
        return nil
    }

    private func line(_ row: JSONValue, _ sequence: Int64) -> [UInt8] {
        // The event's `id` is the sequence as JSON (a string), as CouchDB writes it.
        eventSource ? Array("data: ".utf8) + CanonicalJSON.encode(row) + Array("\nid: \"\(sequence)\"\n\n".utf8)
                    : CanonicalJSON.encode(row) + [10]
    }

    /// The closing `{"last_seq":…}` line (continuous only).
    private func lastSequence() -> [UInt8] {
        eventSource ? [] : CanonicalJSON.encode(.object(["last_seq": .string(String(position)),
                                                          "pending": .int(Int64(max(0, ((try? db.pendingChangeCount(since: query.since)) ?? 0) - sent)))])) + [10]
    }

    /// Ends the feed with its closing line (none for eventsource, which has no last line).
    private func finish() -> [UInt8]? {
        guard !ended else { return nil }
        ended = true
        let last = lastSequence()
        return last.isEmpty ? nil : last
    }
}

/// A longpoll with heartbeats, pulled: a newline each `every` seconds while nothing changed,
/// then the page (or the empty page at `timeout`), then the end.
actor LongpollHeartbeatFeed {
    private let router: RESTRouter
    private let db: Database
    private let query: RESTRouter.ChangesQuery
    private let empty: RESTRouter.ChangesPage
    private let every: Double
    private let deadline: ContinuousClock.Instant
    private var ended = false

    init(router: RESTRouter, db: Database, query: RESTRouter.ChangesQuery, empty: RESTRouter.ChangesPage, every: Double) {
        self.router = router
        self.db = db
        self.query = query
        self.empty = empty
        self.every = every
        deadline = .now + .seconds(query.timeout ?? 60)
    }

    /// A heartbeat, the page, or nil once the page was sent (or the client left).
    func next() async -> [UInt8]? {
        guard !ended else { return nil }
        var changed = false
        let left = deadline - .now
        if left > .zero, !Task.isCancelled {
            changed = await RESTRouter.waitOrTimeout(db, after: empty.last, seconds: min(every, left.seconds))
            if !changed && !Task.isCancelled && ContinuousClock.now < deadline { return [10] }
        }
        ended = true
        guard !Task.isCancelled else { return nil }
        let page = changed ? ((try? router.changesPage(db, query)) ?? empty) : empty
        return page.bytes
    }
}
