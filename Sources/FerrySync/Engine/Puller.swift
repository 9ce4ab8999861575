import FerryBLIP
import FerryStore
import Logging

/// Takes revisions from the peer — the one receiving path of the protocol, for both roles (as
/// LiteCore runs its passive side through the same puller): answers each `changes` (and, for a
/// listener, `proposeChanges`) batch with what it lacks, stores the `rev`s that follow in
/// batched transactions, and keeps each requested revision in one `PullLedger`, which drives
/// the gate, the checkpoint and the caught-up signal (Protocol/replication.md, "Pull flow").
///
/// - `.active`: the replicator's pull. It asks with `subChanges`, writes its checkpoint in the
///   transaction of the revisions it completes, stores conflicts and resolves them with the
///   configured resolver.
/// - `.passive`: a listener taking a client's push. It keeps no checkpoint of its own (the
///   client's is served by `PassivePeer`) and never stores a conflict from the wire: an insert
///   that would fork the document is refused with 409.
final class Puller: Sendable {
    /// Which side of the connection the puller serves.
    enum Role: Sendable {
        /// The replicator's pull; `remote` names the peer for remote-revision bookkeeping.
        /// `downloads`: with a download policy, the queue its wanted attachments go to.
        case active(remote: String, checkpointer: Checkpointer, resolver: ConflictResolver?,
                    downloads: AttachmentDownloadQueue?)
        /// A listener taking a client's push.
        case passive
    }

    let database: Database
    let connection: BLIPConnection
    let role: Role
    /// With a download policy (active role only): the attachments to download once the pull
    /// is caught up (`Puller+Downloads`); without one, every attachment is fetched before its
    /// revision is stored.
    let downloads: AttachmentDownloadQueue?
    let reporter: Reporter
    let logger: Logger
    /// Whether design documents (`_design/…`) are refused, each with 403: a listener's client
    /// without the admin role (CouchDB lets only database admins write them).
    let refusesDesignDocuments: Bool
    private let ledger: PullLedger
    private let inserter: Inserter
    private let batches = RequestQueue()
    private let consumer: Task<Void, Never>

    /// `maxPendingRevisions`: the ledger's gate (see `PullLedger`).
    init(role: Role, database: Database, connection: BLIPConnection, maxPendingRevisions: Int,
         reporter: Reporter, refusesDesignDocuments: Bool = false, logger: Logger) {
        self.role = role
        self.refusesDesignDocuments = refusesDesignDocuments
        // Only the replicator's pull has a download queue and a custom resolver.
        var (downloads, customResolver): (AttachmentDownloadQueue?, ConflictResolver?) = (nil, nil)
        if case .active(_, _, let resolver, let queue) = role { (downloads, customResolver) = (queue, resolver.customResolver) }
        self.downloads = downloads
        self.database = database
        self.connection = connection
        self.reporter = reporter
        self.logger = logger
        let ledger = PullLedger(limit: maxPendingRevisions)
        self.ledger = ledger
        let acknowledger = Acknowledger(database: database, ledger: ledger, reporter: reporter, downloads: downloads,
                                        customResolver: customResolver, logger: logger)
        switch role {
        case .active(let remote, let checkpointer, let resolver, _):
            // The database's policy resolves in the insert's own transaction (the default rule,
            // or nothing under `keep`); a custom resolver runs after the commit (it may throw,
            // and the conflict must then stay).
            let inTransaction = resolver.customResolver == nil ? database.conflictPolicy.automaticResolver : nil
            inserter = Inserter(database: database, remote: remote, resolver: inTransaction, allowConflicts: true,
                                onTheWay: { ledger.onTheWay },
                                afterInsert: { (batch, items, _) throws(StoreError) in
                // Labeled as `stored` takes them, or the array is converted by a dynamic cast per entry.
                let done = items.map { (documentID: $0.revision.documentID, revisionID: $0.revision.history.first ?? "") }
                if let checkpoint = ledger.stored(done) { try checkpointer.recordPulled(upTo: checkpoint, in: batch) }
            }, afterCommit: { checkpointer.pulledCommitted() }, completion: acknowledger.acknowledge)
        case .passive:
            // A passive peer refuses a revision that would fork its copy (Couchbase's rule),
            // unless its policy keeps conflicts as CouchDB does.
            inserter = Inserter(database: database, remote: nil, resolver: nil, allowConflicts: database.conflictPolicy == .keep,
                                maxBatch: ReplicatorTuning.passiveTransactionSize, onTheWay: { ledger.onTheWay },
                                completion: acknowledger.acknowledge)
        }
        // Batches are handled in arrival order, off the event loop, each once the ledger has
        // room; consecutive proposals (one per message, from a simple client) are answered
        // together.
        let answerer = Answerer(database: database, ledger: ledger, inserter: inserter, reporter: reporter, logger: logger,
                                recordsSequences: role.isActive)
        consumer = Task { [batches] in
            while let requests = await batches.next() {
                var rest = requests[...]
                while let first = rest.first {
                    guard await ledger.waitForRoom() else { return }
                    if first.message.profile == ReplicationProtocol.Profile.proposeChanges {
                        let run = rest.prefix { $0.message.profile == ReplicationProtocol.Profile.proposeChanges }
                            .prefix(ReplicatorTuning.batchSize)
                        answerer.answerProposals(Array(run))
                        rest = rest.dropFirst(run.count)
                    } else {
                        answerer.answerChanges(first)
                        rest = rest.dropFirst()
                    }
                }
            }
        }
    }

    /// Registers the receiving profiles on the connection: `changes`, `rev`, `norev`,
    /// `getAttachment` (the peer fetches the attachments of what it pulls from us too), and for
    /// a listener `proposeChanges`.
    func register() {
        let queue = batches
        typealias P = ReplicationProtocol.Profile
        connection.register(profile: P.changes) { queue.append($0) }
        if !role.isActive { connection.register(profile: P.proposeChanges) { queue.append($0) } }
        connection.register(profile: P.rev) { [self] in handleRev($0) }
        connection.register(profile: P.norev) { [self] in handleNoRev($0) }
        let db = database
        connection.register(profile: P.getAttachment) { AttachmentTransfer.serve($0, database: db) }
    }

    /// Sends `subChanges` (active role); the peer's changes then arrive on their own.
    func start(since: JSONValue, continuous: Bool, batchSize: Int, filter: String?, parameters: [String: String],
               documentIDs: [String]?) async throws(ReplicationError) {
        inserter.setLingerBatch(ReplicatorTuning.lingerBatch(feederWindow: batchSize))
        inserter.setMaxBatch(ReplicatorTuning.pullTransactionSize(feederWindow: batchSize))
        typealias Q = ReplicationProtocol.Property
        var props: BLIPProperties = [(Q.since, String(decoding: CanonicalJSON.encode(since), as: UTF8.self)),
                                     (Q.batch, String(batchSize))]
        if continuous { props[Q.continuous] = "true" }
        if let filter {
            props[Q.filter] = filter
            for (k, v) in parameters.sorted(by: { $0.key < $1.key }) { props[k] = v }
        }
        var body: [UInt8] = []
        if let documentIDs { body = CanonicalJSON.encode(.object(["docIDs": .array(documentIDs.map { .string($0) })])) }
        do { _ = try await connection.send(.request(profile: ReplicationProtocol.Profile.subChanges, properties: props, body: body)) }
        catch { throw ReplicationError(error) }
    }

    /// Returns once the peer said it is caught up and everything it sent is stored (one-shot),
    /// or when the session ended with an error (then with that error). A continuous puller only
    /// returns for an error (or `close()`).
    func waitUntilDone(continuous: Bool) async -> ReplicationError? {
        await ledger.waitUntilDone(continuous: continuous)
    }

    /// Returns true once the pull is caught up with nothing outstanding; false if the session
    /// ended first.
    func waitUntilIdle() async -> Bool {
        await ledger.waitUntilIdle()
    }

    /// Stops taking messages and finishes storing what arrived.
    func close() async {
        batches.finish()
        ledger.close()
        await consumer.value
        await inserter.close()
    }

    // MARK: rev / norev

    private func handleRev(_ request: BLIPIncomingRequest) {
        ledger.arrived()
        if refusesDesignDocuments, refuseDesignDocument(request) { return }
        let taken = RevReceiver.receive(request, database: database, downloads: downloads, failed: { [self] revision, error in
            giveUp(documentID: revision.documentID, revisionID: revision.history.first, isDeleted: revision.isDeleted,
                   arrived: true, error: error)
        }) { [self] in store($0, $1, deferring: $2) }
        guard !taken else { return }
        // A `rev` without its document or revision ID cannot complete the entry it was sent
        // for, so the checkpoint could never pass it: like an unreadable `changes`, the peer
        // broke the protocol and the session ends with the error.
        _ = ledger.withdrawn(nil, arrived: true, keepOpen: true)
        inserter.nudge()
        let error = ReplicationError.protocolError("rev without a document or revision ID")
        logger.warning("bad rev message", metadata: ["error": "\(error)"])
        ledger.end(with: error)
    }

    /// Stores a received revision; `deferred` are the attachments its download policy wants,
    /// queued once it is stored (before it counts as ended, so a caught-up pull has them all).
    /// The `Acknowledger` answers it once its transaction commits.
    private func store(_ revision: ReplicatedRevision, _ request: BLIPIncomingRequest, deferring deferred: [AttachmentDownload]) {
        inserter.enqueue(Inserter.Item(revision: revision, request: request, deferred: deferred))
    }

    /// Refuses a design document's `rev` (403, before any attachment is fetched) and returns
    /// true; false for any other document.
    private func refuseDesignDocument(_ request: BLIPIncomingRequest) -> Bool {
        typealias Q = ReplicationProtocol.Property
        let p = request.message.properties
        guard let id = p[Q.id], Document.isDesignID(id) else { return false }
        let error = StoreError.rejected(status: 403, message: "You are not a db or server admin.")
        giveUp(documentID: id, revisionID: p[Q.rev], isDeleted: p.bool(Q.deleted), arrived: true, error: .store(error))
        request.respondHTTPError(error.wireStatus, error.wireMessage)
        return true
    }

    private func handleNoRev(_ request: BLIPIncomingRequest) {
        typealias Q = ReplicationProtocol.Property
        let p = request.message.properties
        guard let id = p[Q.id], let rev = p[Q.rev] else { return }
        let code = p[Q.error].flatMap { Int($0) } ?? 404
        giveUp(documentID: id, revisionID: rev, isDeleted: false, arrived: false,
               error: .remote(domain: ReplicationProtocol.Domain.http, code: code, message: p[Q.reason] ?? "norev"))
    }

    /// A revision asked for will not be stored (`norev`, or its attachments could not be
    /// fetched): reported as a document error, and done with, so the checkpoint can pass it.
    private func giveUp(documentID: String, revisionID: String?, isDeleted: Bool, arrived: Bool, error: ReplicationError) {
        // A failure that may pass (the connection broke, the disk is full) keeps the entry
        // open, so the checkpoint stops before it, and ends the session; the next one asks again.
        let transient = error.isTransient
        let standing = ledger.withdrawn(revisionID.map { (documentID, $0) }, arrived: arrived, keepOpen: transient)
        inserter.nudge()
        if transient { return ledger.end(with: error) }
        reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: revisionID,
                                     isDeleted: isDeleted, kind: .failed(error)))
        if standing.checkpointBehind { inserter.requestCommit() }
        reporter.completed(1)
        if standing.idle { reporter.caughtUp(.pull) }
    }
}

extension Puller.Role {
    /// Whether this is the replicator's own pull.
    var isActive: Bool {
        if case .active = self { return true }
        return false
    }
}
