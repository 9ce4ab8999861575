import FerryBLIP
import FerryStore
import Logging
import Synchronization

/// Serves one database on one accepted connection (reference §3.1, passive role): keeps the
/// client's checkpoints, feeds its pulls (`subChanges` → `changes` + `rev`), takes its pushes
/// (`proposeChanges`/`changes` + `rev`) without ever storing a conflict from the wire (409,
/// reference §4.7), and answers every other profile with BLIP/404.
final class PassivePeer: Sendable {
    let database: Database
    let connection: BLIPConnection
    let pullFilters: @Sendable (String) -> PullFilter?
    let logger: Logger
    let reporter: Reporter
    private let inserter: Inserter
    private let work: AsyncStream<BLIPIncomingRequest>.Continuation
    private let worker: Task<Void, Never>
    private let feed = Mutex<Task<Void, Never>?>(nil)

    /// Properties of `subChanges` that are not pull-filter parameters.
    static let subChangesProperties: Set<String> = ["Profile", "since", "continuous", "batch", "activeOnly", "filter",
                                                    "channels", "revocations", "sendReplacementRevs", "versioning",
                                                    "requestPlus", "future", "collection", "client_sgr2"]

    init(database: Database, connection: BLIPConnection, pullFilters: @escaping @Sendable (String) -> PullFilter?,
         reporter: Reporter, logger: Logger) {
        self.reporter = reporter
        self.database = database
        self.connection = connection
        self.pullFilters = pullFilters
        self.logger = logger
        // A pushing Ferry peer keeps up to four batches of revisions in flight: one transaction
        // takes up to a whole default batch, so fewer commits rewrite the indexes' hot pages.
        let inserter = Inserter(database: database, remote: nil, resolver: nil, allowConflicts: false,
                                maxBatch: ReplicatorConfiguration.defaultBatchSize)
        self.inserter = inserter
        let (stream, continuation) = AsyncStream<BLIPIncomingRequest>.makeStream()
        work = continuation
        // Store work never runs on the event loop; control messages are handled in order.
        worker = Task { [database, logger] in
            for await request in stream {
                PassivePeer.handleControl(request, database: database, logger: logger) { inserter.expect($0) }
            }
        }
    }

    /// Registers the handlers. Call on the connection's loop as soon as it opens, so that no
    /// request arrives before its handler.
    func register() {
        let work = self.work
        for profile in ["getCheckpoint", "setCheckpoint", "proposeChanges", "changes"] {
            connection.register(profile: profile) { work.yield($0) }
        }
        connection.register(profile: "subChanges") { [self] in startFeed($0) }
        connection.register(profile: "rev") { [self] in handleRev($0) }
        let db = database
        connection.register(profile: "getAttachment") { AttachmentTransfer.serve($0, database: db) }
    }

    /// Serves until the connection closes, then stops the workers.
    func serve() async {
        _ = await connection.closed()
        work.finish()
        feed.withLock { $0 }?.cancel()
        await worker.value
        await feed.withLock { $0 }?.value
        await inserter.close()
    }

    // MARK: Checkpoints, proposals, legacy changes (in order, off the loop)

    /// Handles one control message; `expect` hears how many revisions a reply just asked for.
    static func handleControl(_ request: BLIPIncomingRequest, database: Database, logger: Logger,
                              expect: (Int) -> Void = { _ in }) {
        let m = request.message
        switch m.profile {
        case "getCheckpoint":
            guard let client = m.properties["client"], !client.isEmpty else { return request.respondHTTPError(400, "missing client") }
            do {
                guard let doc = try database.localDocument("peerCheckpoint/" + client) else {
                    return request.respondHTTPError(404, "missing")
                }
                request.respond(properties: [("rev", doc.revision)], body: CanonicalJSON.encode(.object(doc.properties)))
            } catch { request.respondHTTPError(error.wireStatus, error.wireMessage) }
        case "setCheckpoint":
            guard let client = m.properties["client"], !client.isEmpty else { return request.respondHTTPError(400, "missing client") }
            let id = "peerCheckpoint/" + client
            do {
                let props = try JSONParser.parseObject(m.body, sizeLimit: 1 << 20)
                let rev = m.properties["rev"].flatMap { $0.isEmpty ? nil : $0 }
                if rev == nil, try database.localDocument(id) != nil {
                    return request.respondHTTPError(409, "revision ID mismatch")
                }
                let newRev = try database.putLocalDocument(id, properties: props, expectedRevision: rev)
                request.respond(properties: [("rev", newRev)])
            } catch .conflict {
                request.respondHTTPError(409, "revision ID mismatch")
            } catch .notFound {
                request.respondHTTPError(409, "revision ID mismatch")
            } catch { request.respondHTTPError(error.wireStatus, error.wireMessage) }
        case "proposeChanges":
            do {
                let proposals = try ReplicationMessages.decodeProposals(m.body)
                guard !m.isNoReply else { return }
                let statuses = try RevFinder.answer(proposals, database: database)
                expect(statuses.count { if case .send = $0 { true } else { false } })
                request.respond(body: ReplicationMessages.encodeProposalStatuses(statuses))
            } catch let e as ReplicationError { request.respondHTTPError(400, "\(e)") }
            catch { request.respondHTTPError(500, "\(error)") }
        case "changes":
            do {
                let entries = try ReplicationMessages.decodeChanges(m.body)
                guard !m.isNoReply else { return }
                let answers = try RevFinder.answer(entries, database: database)
                expect(answers.count { if case .send = $0 { true } else { false } })
                request.respond(properties: [("maxHistory", "50")], body: ReplicationMessages.encodeChangeAnswers(answers))
            } catch let e as ReplicationError { request.respondHTTPError(400, "\(e)") }
            catch { request.respondHTTPError(500, "\(error)") }
        default:
            request.respondError(domain: "BLIP", code: 404, message: BLIPConstants.noHandlerMessage)
        }
    }

    // MARK: Pushes from the client

    private func handleRev(_ request: BLIPIncomingRequest) {
        RevReceiver.receive(request, database: database, policy: nil, failed: { _, _ in }) { [self] in store($0, $1) }
    }

    private func store(_ revision: ReplicatedRevision, _ request: BLIPIncomingRequest) {
        let reporter = self.reporter
        inserter.enqueue(revision) { result in
            let rev = revision.history.first
            switch result {
            case .success:
                if !request.message.isNoReply { request.respond() }
                reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: rev,
                                             isDeleted: revision.isDeleted, kind: .pulled))
            case .failure(let e):
                request.respondHTTPError(e.wireStatus, e.wireMessage)
                reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: rev,
                                             isDeleted: revision.isDeleted, kind: .failed(.store(e))))
            }
        }
    }

    // MARK: Pulls by the client

    private func startFeed(_ request: BLIPIncomingRequest) {
        let m = request.message
        let since = m.properties["since"].flatMap { Int64($0) } ?? 0
        let continuous = m.properties.bool("continuous")
        let batch = min(max(m.properties["batch"].flatMap { Int($0) } ?? 200, 1), 1000)
        var docIDs: Set<String>?
        if !m.body.isEmpty {
            guard case .object(let o)? = try? JSONParser.parse(m.body, sizeLimit: ReplicationMessages.maxBodySize) else {
                return request.respondHTTPError(400, "subChanges body is not a JSON object")
            }
            if let ids = o["docIDs"]?.arrayValue { docIDs = Set(ids.compactMap(\.stringValue)) }
        }
        var filter: PullFilter?
        var params: [String: String] = [:]
        if let name = m.properties["filter"] {
            guard let f = pullFilters(name) else { return request.respondHTTPError(404, "no pull filter named \(name)") }
            filter = f
            for (k, v) in m.properties where !Self.subChangesProperties.contains(k) { params[k] = v }
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
                            batchSize: batch, select: selector, reporter: reporter, logger: logger)
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
