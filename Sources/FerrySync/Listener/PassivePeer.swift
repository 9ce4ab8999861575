import FerryBLIP
import FerryStore
import Logging
import Synchronization

/// Serves one database on one accepted connection (Protocol/replication.md, "Roles"). It keeps
/// only what is the listener's own — the checkpoints it keeps for the client
/// (`getCheckpoint`/`setCheckpoint`) and the start of the client's pull feed (`subChanges`) —
/// and runs the protocol through the same engine as the replicator: the client's pushes go to
/// a passive `Puller`, its pulls are fed by a `Pusher` in `.changes` mode. Any other profile is
/// answered BLIP/404 by the connection.
final class PassivePeer: Sendable {
    let database: Database
    let connection: BLIPConnection
    /// The listener's pull filters and reporter.
    let listener: SyncListener.Shared
    let logger: Logger
    private let puller: Puller
    private let checkpoints: AsyncStream<BLIPIncomingRequest>.Continuation
    private let checkpointWorker: Task<Void, Never>
    private let feed = Mutex<Task<Void, Never>?>(nil)

    /// Whether the client may only pull: its pushes are answered 403 and nothing is written.
    let readOnly: Bool

    /// `designDocuments`: whether the client may push design documents (`_design/…`); when
    /// not, each is refused with 403 and the rest of its push goes on.
    init(database: Database, connection: BLIPConnection, listener: SyncListener.Shared, readOnly: Bool = false,
         designDocuments: Bool = true, logger: Logger) {
        (self.database, self.connection, self.listener, self.logger) = (database, connection, listener, logger)
        self.readOnly = readOnly
        puller = Puller(role: .passive, database: database, connection: connection,
                        maxPendingRevisions: ReplicatorTuning.maxPendingRevisions(batchSize: ReplicatorTuning.batchSize),
                        reporter: listener.reporter, refusesDesignDocuments: !designDocuments, logger: logger)
        let (stream, continuation) = AsyncStream<BLIPIncomingRequest>.makeStream()
        checkpoints = continuation
        // Store work never runs on the event loop; checkpoint messages are handled in order.
        checkpointWorker = Task { [database] in
            for await request in stream { await CheckpointServer.handle(request, database: database) }
        }
    }

    /// Registers the handlers. Call on the connection's loop as soon as it opens, so that no
    /// request arrives before its handler.
    func register() {
        typealias P = ReplicationProtocol.Profile
        let checkpoints = self.checkpoints
        for profile in [P.getCheckpoint, P.setCheckpoint] {
            connection.register(profile: profile) { checkpoints.yield($0) }
        }
        connection.register(profile: P.subChanges) { [self] in startFeed($0) }
        if readOnly {
            // Couchbase Lite's read-only listener: a push is refused at its first message, so
            // no revision is even asked for.
            for profile in [P.changes, P.proposeChanges, P.rev] {
                connection.register(profile: profile) { $0.respondHTTPError(403, "this peer may only pull from this database") }
            }
        } else {
            puller.register()
        }
    }

    /// Serves until the connection closes, then stops the workers.
    func serve() async {
        _ = await connection.closed()
        checkpoints.finish()
        feed.withLock { $0 }?.cancel()
        await checkpointWorker.value
        await feed.withLock { $0 }?.value
        await puller.close()
    }

    // MARK: Pulls by the client

    private func startFeed(_ request: BLIPIncomingRequest) {
        typealias Q = ReplicationProtocol.Property
        let m = request.message
        let since = m.properties[Q.since].flatMap { Int64($0) } ?? 0
        let continuous = m.properties.bool(Q.continuous)
        let batch = min(max(m.properties[Q.batch].flatMap { Int($0) } ?? ReplicatorTuning.feedBatchSize, 1),
                        ReplicatorTuning.feedBatchLimit)
        var docIDs: Set<String>?
        if !m.body.isEmpty {
            guard case .object(let o)? = try? JSONParser.parse(m.body, sizeLimit: ReplicationMessages.maxBodySize) else {
                return request.respondHTTPError(400, "subChanges body is not a JSON object")
            }
            if let ids = o["docIDs"]?.arrayValue { docIDs = Set(ids.compactMap(\.stringValue)) }
        }
        var filter: PullFilter?
        var params: [String: String] = [:]
        if let name = m.properties[Q.filter], name == Q.selectorFilter {
            // Ferry's extension (Protocol/replication.md, "Selector pulls"): a Mango selector,
            // as CouchDB's `_changes?filter=_selector` takes it, in the `selector` property.
            guard let text = m.properties[Q.selector], let json = try? JSONParser.parse(Array(text.utf8), sizeLimit: 1 << 20, maxDepth: 64) else {
                return request.respondHTTPError(400, "filter _selector needs a JSON selector property")
            }
            let selector: MangoSelector
            do { selector = try MangoSelector(json: json) } catch {
                return request.respondHTTPError(400, "bad selector: \(error.reason)")
            }
            filter = { doc, _, _ in selector.matches(doc) }
        } else if let name = m.properties[Q.filter] {
            guard let f = listener.filters.withLock({ $0[name] }) else { return request.respondHTTPError(404, "no pull filter named \(name)") }
            filter = f
            for (k, v) in m.properties where !Q.subChangesOwn.contains(k) { params[k] = v }
        }
        let alreadyFeeding = feed.withLock { $0 != nil }
        guard !alreadyFeeding else { return request.respondHTTPError(409, "subChanges already active on this connection") }
        request.respond()

        let database = self.database
        let (onlyIDs, pullFilter, parameters) = (docIDs, filter, params)
        var accept: (@Sendable (Document, DocumentFlags) -> Bool)?
        if let pullFilter { accept = { doc, flags in pullFilter(doc, flags, parameters) } }
        let selector = Pusher.selector(database: database, documentIDs: onlyIDs, filter: accept)
        let pusher = Pusher(database: database, connection: connection, mode: .changes, continuous: continuous,
                            batchSize: batch, select: selector, reporter: listener.reporter, logger: logger)
        let logger = self.logger
        let connection = self.connection
        feed.withLock { $0 = Task {
            do throws(ReplicationError) { try await pusher.run(since: since) } catch {
                if Task.isCancelled { return }
                if case .connection = error {
                    logger.info("pull feed ended", metadata: ["error": "\(error)"])
                    return
                }
                // The client waits for what it asked for: a feed that cannot go on must not
                // leave it waiting on an open connection (a silent stall). Closed, the client
                // reconnects and resumes from its checkpoint.
                logger.warning("pull feed failed; closing the connection", metadata: ["error": "\(error)"])
                await connection.close()
            }
        } }
    }
}
