import FerryBLIP
import FerryStore
import Logging
import Synchronization

/// The active side of a pull (reference §3.12): asks the peer for its changes (`subChanges`),
/// answers each `changes` batch with what it lacks, stores the `rev`s that follow in batched
/// transactions (with the checkpoint they complete, in the same transaction), and resolves the
/// conflicts they create with the configured resolver.
final class Puller: Sendable {
    final class State: Sendable {
        struct Value {
            var tracker = SequenceTracker()
            var caughtUp = false
            /// Set when the peer broke the protocol or a revision could not be stored for a
            /// reason that may pass; ends the session.
            var error: ReplicationError?
            /// Set once a transaction failed as a whole: the tracker may count its revisions
            /// done, so no later transaction of this session may save the checkpoint.
            var storeFailed = false
            /// The checkpoint last written (by a transaction that may still be committing).
            var recorded: JSONValue?
            /// Revisions handed to the inserter whose completion has not finished: a stored
            /// revision counts as done in the tracker inside its transaction, but a custom
            /// resolver runs in the completion, after it — a one-shot pull that ended before it
            /// would leave the resolution for no push to send.
            var storing = 0

            /// Whether the tracker has passed the checkpoint last written: only known or given-up
            /// changes were listed since, and no revision's transaction will save it.
            var checkpointBehind: Bool { !storeFailed && tracker.checkpoint != nil && tracker.checkpoint != recorded }
            var waiters: [(continuous: Bool, continuation: CheckedContinuation<ReplicationError?, Never>)] = []

            mutating func releaseAll() -> [CheckedContinuation<ReplicationError?, Never>] {
                defer { waiters = [] }
                return waiters.map(\.continuation)
            }

            /// The waiters that can be released now.
            mutating func releasable() -> [CheckedContinuation<ReplicationError?, Never>] {
                let idle = caughtUp && tracker.isEmpty && storing == 0
                var out: [CheckedContinuation<ReplicationError?, Never>] = []
                waiters.removeAll { w in
                    guard error != nil || (idle && !w.continuous) else { return false }
                    out.append(w.continuation)
                    return true
                }
                return out
            }
        }
        let value = Mutex(Value())

        /// The peer broke the protocol: the session ends with an error (the first one is
        /// kept), and whoever waits for the pull is told `error`.
        func end(with error: ReplicationError) {
            let waiters = value.withLock { s in
                s.error = s.error ?? error
                return s.releasable()
            }
            for w in waiters { w.resume(returning: error) }
        }
    }

    let database: Database
    let connection: BLIPConnection
    let reporter: Reporter
    let logger: Logger
    let resolver: ReplicationConflictResolver?
    let checkpointer: Checkpointer
    let downloadPolicy: AttachmentDownloadPolicy?
    private let state: State
    private let pending: PendingRevisions
    private let inserter: Inserter
    private let changesQueue: AsyncStream<BLIPIncomingRequest>.Continuation
    private let consumer: Task<Void, Never>

    init(database: Database, connection: BLIPConnection, remote: String, resolver: ReplicationConflictResolver?,
         checkpointer: Checkpointer, downloadPolicy: AttachmentDownloadPolicy?, maxPendingRevisions: Int,
         reporter: Reporter, logger: Logger) {
        self.database = database
        self.downloadPolicy = downloadPolicy
        self.connection = connection
        self.reporter = reporter
        self.logger = logger
        self.resolver = resolver
        self.checkpointer = checkpointer
        let state = State()
        self.state = state
        // The default rule resolves in the insert's own transaction; a custom resolver runs
        // after the commit (it may throw, and the conflict must then stay).
        let inTransaction: ConflictResolver? = resolver?.resolve == nil ? .default : nil
        let inserter = Inserter(database: database, remote: remote, resolver: inTransaction, allowConflicts: true,
                                afterInsert: { (batch, items, _) throws(StoreError) in
            let advanced = state.value.withLock { s -> JSONValue? in
                guard !s.storeFailed else { return nil }
                for item in items {
                    s.tracker.complete(documentID: item.revision.documentID, revisionID: item.revision.history.first ?? "")
                }
                guard s.checkpointBehind, let cp = s.tracker.checkpoint else { return nil }
                s.recorded = cp
                return cp
            }
            if let advanced { try checkpointer.recordPulled(upTo: advanced, in: batch) }
        }, afterCommit: { checkpointer.pulledCommitted() })
        self.inserter = inserter
        let (stream, continuation) = AsyncStream<BLIPIncomingRequest>.makeStream()
        changesQueue = continuation
        let pending = PendingRevisions(limit: maxPendingRevisions)
        self.pending = pending
        // `changes` messages are handled one at a time, in arrival order, off the event loop,
        // each once at most `maxPendingRevisions` revisions asked for are not stored yet.
        let db = database
        consumer = Task {
            for await request in stream {
                guard await pending.waitForRoom() else { break }
                Puller.handleChanges(request, database: db, state: state, pending: pending, inserter: inserter,
                                     reporter: reporter, checkpointer: checkpointer, logger: logger)
            }
        }
    }

    /// Registers the pull profiles on the connection.
    func register() {
        let queue = changesQueue
        connection.register(profile: "changes") { queue.yield($0) }
        connection.register(profile: "rev") { [self] in handleRev($0) }
        connection.register(profile: "norev") { [self] in handleNoRev($0) }
        let db = database
        connection.register(profile: "getAttachment") { AttachmentTransfer.serve($0, database: db) }
    }

    /// Sends `subChanges`; the peer's changes then arrive on their own.
    func start(since: JSONValue, continuous: Bool, batchSize: Int, filter: String?, parameters: [String: String],
               documentIDs: [String]?) async throws(ReplicationError) {
        inserter.setLingerBatch(min(64, batchSize / 2))
        // A transaction takes at most half the feeder's window (one batch; a Ferry feeder caps
        // it at 1000): the feeder keeps sending the other half while it commits, instead of
        // stalling until the whole window is answered. Never more than 200, as before.
        inserter.setMaxBatch(min(200, batchSize / 2))
        var props: BLIPProperties = [("since", String(decoding: CanonicalJSON.encode(since), as: UTF8.self)),
                                     ("batch", String(batchSize))]
        if continuous { props["continuous"] = "true" }
        if let filter {
            props["filter"] = filter
            for (k, v) in parameters.sorted(by: { $0.key < $1.key }) { props[k] = v }
        }
        var body: [UInt8] = []
        if let documentIDs { body = CanonicalJSON.encode(.object(["docIDs": .array(documentIDs.map { .string($0) })])) }
        do { _ = try await connection.send(.request(profile: "subChanges", properties: props, body: body)) }
        catch { throw ReplicationError(error) }
    }

    /// Returns once the peer said it is caught up and everything it sent is stored (one-shot),
    /// or when the peer broke the protocol (then with that error). A continuous puller only
    /// returns for an error (or `close()`).
    func waitUntilDone(continuous: Bool) async -> ReplicationError? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<ReplicationError?, Never>) in
                let (ready, e) = state.value.withLock { s in
                    s.waiters.append((continuous, c))
                    // A cancelled session (stop, lost connection) stops waiting at once.
                    return (Task.isCancelled ? s.releaseAll() : s.releasable(), s.error)
                }
                for w in ready { w.resume(returning: e) }
            }
        } onCancel: {
            let (ready, e) = state.value.withLock { s in (s.releaseAll(), s.error) }
            for w in ready { w.resume(returning: e) }
        }
    }

    /// Stops taking messages and finishes storing what arrived.
    func close() async {
        changesQueue.finish()
        pending.close()
        await consumer.value
        await inserter.close()
        let waiters = state.value.withLock { s in defer { s.waiters = [] }; return s.waiters }
        for w in waiters { w.continuation.resume(returning: nil) }
    }

    // MARK: changes

    private static func handleChanges(_ request: BLIPIncomingRequest, database: Database, state: State,
                                      pending: PendingRevisions, inserter: Inserter, reporter: Reporter,
                                      checkpointer: Checkpointer, logger: Logger) {
        let entries: [ReplicationMessages.ChangeEntry]
        do { entries = try ReplicationMessages.decodeChanges(request.message.body) } catch {
            // A feed we cannot read cannot be checkpointed past: the session ends with the error.
            logger.warning("bad changes message", metadata: ["error": "\(error)"])
            request.respondHTTPError(400, "\(error)")
            state.end(with: error)
            return
        }
        if entries.isEmpty {
            if !request.message.isNoReply { request.respond() }
            let (waiters, idle, behind) = state.value.withLock { s in
                s.caughtUp = true
                return (s.releasable(), s.tracker.isEmpty, s.checkpointBehind)
            }
            // Listed changes that were all known (or given up on) still move the checkpoint.
            if behind { inserter.requestCommit() }
            if idle { reporter.caughtUp(.pull) }
            for w in waiters { w.resume(returning: nil) }
            return
        }
        reporter.found(entries.count, direction: .pull)
        let answers: [ReplicationMessages.ChangeAnswer]
        do { answers = try RevFinder.answer(entries, database: database) } catch {
            // Unanswered, these changes would never be sent: the session ends (a transient
            // store error is retried) and the next one lists them again.
            request.respondHTTPError(error.wireStatus, error.wireMessage)
            state.end(with: .store(error))
            return
        }
        var skipped = 0
        // Changes after the caught-up marker (a continuous feed) keep `caughtUp`: the session is
        // idle again as soon as what they asked for is stored, which may be at once.
        let (idle, behind) = state.value.withLock { s in
            for (e, a) in zip(entries, answers) {
                let wanted: Bool
                if case .send = a { wanted = true } else { wanted = false }
                if !wanted { skipped += 1 }
                s.tracker.add(documentID: e.documentID, revisionID: e.revisionID, sequence: e.sequence, done: !wanted)
            }
            return (s.caughtUp && s.tracker.isEmpty, skipped == entries.count && s.checkpointBehind)
        }
        // A batch of changes we already have (a peer listing back what we pushed it, as Sync
        // Gateway does) brings no revision whose transaction would save the checkpoint: ask for
        // one, so the next session does not list them again (LiteCore does the same).
        if behind { inserter.requestCommit() }
        reporter.caughtUp(.pull, idle)
        reporter.completed(skipped)
        pending.requested(entries.count - skipped)
        inserter.expect(entries.count - skipped)
        request.respond(properties: [("maxHistory", "50")], body: ReplicationMessages.encodeChangeAnswers(answers))
    }

    // MARK: rev / norev

    private func handleRev(_ request: BLIPIncomingRequest) {
        let taken = RevReceiver.receive(request, database: database, policy: downloadPolicy, failed: { [self] revision, error in
            giveUp(documentID: revision.documentID, revisionID: revision.history.first, isDeleted: revision.isDeleted,
                   error: error)
        }) { [self] in store($0, $1) }
        guard !taken else { return }
        // A `rev` without its document or revision ID cannot complete the entry it was sent
        // for, so the checkpoint could never pass it: like an unreadable `changes`, the peer
        // broke the protocol and the session ends with the error.
        withdraw()
        let error = ReplicationError.protocolError("rev without a document or revision ID")
        logger.warning("bad rev message", metadata: ["error": "\(error)"])
        state.end(with: error)
    }

    private func store(_ revision: ReplicatedRevision, _ request: BLIPIncomingRequest) {
        let rev = revision.history.first ?? ""
        state.value.withLock { $0.storing += 1 }
        inserter.enqueue(revision) { [self] result in
            pending.finished()
            switch result {
            case .success(let outcome):
                if !request.message.isNoReply { request.respond() }
                reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: rev,
                                             isDeleted: revision.isDeleted, kind: .pulled))
                if let local = outcome.conflictedWith {
                    if outcome.resolved {
                        reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: outcome.current?.description,
                                                     isDeleted: false, kind: .conflictResolved))
                    } else if let custom = resolver?.resolve, let remote = try? RevisionID(rev) {
                        ConflictResolving.resolve(database: database, documentID: revision.documentID, local: local, remote: remote,
                                                  using: custom, reporter: reporter)
                    }
                }
            case .failure(let error) where error.isTransient:
                // Disk full, I/O: the revision must come again. Its transaction stored nothing
                // (and may have counted its revisions done): the session ends here, and the
                // next one pulls from the last saved checkpoint, once the store works again.
                state.value.withLock { $0.storeFailed = true }
                request.respondHTTPError(error.wireStatus, error.wireMessage)
                logger.warning("could not store a pulled revision; the pull restarts", metadata: ["error": "\(error)"])
                state.end(with: .store(error))
            case .failure(let error):
                request.respondHTTPError(error.wireStatus, error.wireMessage)
                reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: rev,
                                             isDeleted: revision.isDeleted, kind: .failed(.store(error))))
            }
            reporter.completed(1)
            state.value.withLock { $0.storing -= 1 }
            finishIfCaughtUp()
        }
    }

    private func handleNoRev(_ request: BLIPIncomingRequest) {
        let p = request.message.properties
        guard let id = p["id"], let rev = p["rev"] else { return }
        let code = p["error"].flatMap { Int($0) } ?? 404
        giveUp(documentID: id, revisionID: rev, isDeleted: false,
               error: .remote(domain: "HTTP", code: code, message: p["reason"] ?? "norev"))
    }

    /// A revision asked for will not reach the inserter: it no longer counts as pending, nor
    /// as on its way to the writer.
    private func withdraw() {
        pending.finished()
        inserter.expect(-1)
    }

    /// A revision asked for will not be stored (`norev`, or its attachments could not be
    /// fetched): reported as a document error, and done with, so the checkpoint can pass it.
    private func giveUp(documentID: String, revisionID: String?, isDeleted: Bool, error: ReplicationError) {
        withdraw()
        if error.isTransient {
            // Its attachments could not be fetched for a reason that may pass (the connection
            // broke, the disk is full): the entry stays open, so the checkpoint stops before
            // it, and the session ends; the next one asks for it again.
            state.end(with: error)
            return
        }
        reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: revisionID,
                                     isDeleted: isDeleted, kind: .failed(error)))
        let behind = state.value.withLock { s in
            s.tracker.complete(documentID: documentID, revisionID: revisionID ?? "")
            return s.checkpointBehind
        }
        if behind { inserter.requestCommit() }
        reporter.completed(1)
        finishIfCaughtUp()
    }

    private func finishIfCaughtUp() {
        let (waiters, idle) = state.value.withLock { s in (s.releasable(), s.caughtUp && s.tracker.isEmpty) }
        if idle { reporter.caughtUp(.pull) }
        for w in waiters { w.resume(returning: nil) }
    }
}
