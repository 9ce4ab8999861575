import FerryBLIP
import FerryStore
import Logging

/// Sends this database's changes to a peer: reads the change feed in batches, asks the peer
/// which revisions it wants, sends those as `rev` messages and learns which the peer stored,
/// with a bounded amount in flight (see `run`). Two modes, one per role
/// (Protocol/replication.md, "Push flow" and "Pull flow"):
/// - `.propose` — the active pusher: `proposeChanges` naming the remote parent, revisions sent
///   with `noconflicts`; the peer refuses anything that would fork its copy (409).
/// - `.changes` — a passive peer answering `subChanges`: `changes` with sequences, the puller
///   answers with the ancestors it has.
final class Pusher: Sendable {
    enum Mode: Sendable {
        /// Active push; `remote` names the peer for remote-revision bookkeeping; `alsoPulling`
        /// means a 409 is left for the pull side to bring in and resolve.
        case propose(remote: String, alsoPulling: Bool)
        /// Passive side of a pull.
        case changes
    }

    /// Decides whether a change is sent (document IDs, filters).
    typealias Selector = @Sendable (Change) throws -> Bool

    /// The selector for a document-ID set and a filter given the document (tombstone fields
    /// included) and its flags; nil when neither is set (every change is sent, no reads).
    static func selector(database: Database, documentIDs: Set<String>?,
                         filter: (@Sendable (Document, DocumentFlags) -> Bool)?) -> Selector? {
        guard documentIDs != nil || filter != nil else { return nil }
        return { change in
            if let documentIDs, !documentIDs.contains(change.documentID) { return false }
            guard let filter else { return true }
            guard let doc = try database.document(change.documentID, includeDeleted: true) else { return false }
            return filter(doc, change.isDeleted ? .deleted : [])
        }
    }

    let database: Database
    let connection: BLIPConnection
    let mode: Mode
    let continuous: Bool
    let batchSize: Int
    let select: Selector?
    let reporter: Reporter
    /// Runs after each batch with the last sequence it covered (the active side's checkpoint)
    /// and whether every batch so far has completed (the push is caught up).
    let batchDone: @Sendable (Int64, Bool) async throws -> Void
    let logger: Logger

    init(database: Database, connection: BLIPConnection, mode: Mode, continuous: Bool, batchSize: Int,
         select: Selector?, reporter: Reporter, logger: Logger,
         batchDone: @escaping @Sendable (Int64, Bool) async throws -> Void = { _, _ in }) {
        self.database = database
        self.connection = connection
        self.mode = mode
        self.continuous = continuous
        self.batchSize = max(1, batchSize)
        self.select = select
        self.reporter = reporter
        self.logger = logger
        self.batchDone = batchDone
    }

    private var profile: String {
        if case .propose = mode { return ReplicationProtocol.Profile.proposeChanges }
        return ReplicationProtocol.Profile.changes
    }

    /// Pushes from `since` until caught up (one-shot) or until cancelled / disconnected
    /// (continuous). Throws on a connection failure or a peer refusing a whole batch.
    func run(since: Int64) async throws(ReplicationError) {
        var position = since
        var announcedCaughtUp = false
        // Changes already counted in the progress total; later ones (new writes) are added.
        var counted: Int
        do { counted = try database.pendingChangeCount(since: since) } catch { throw .store(error) }
        reporter.found(counted, direction: .push)
        // An active push keeps several batches in flight (proposing the next ones while earlier
        // revisions are being stored), checkpointing them in order: a batch lost to a crash is
        // only re-proposed, and the peer answers 304 for what it already stored. A feed for a
        // pull streams: each batch's `changes` go out before the previous batch's revisions, so
        // no round trip stalls it, and a window bounds the unanswered revisions to one batch, so
        // a killed puller is re-sent at most that many.
        var inFlight: [(task: Task<Result<Void, ReplicationError>, Never>, last: Int64)] = []
        // A feed's batch whose `changes` went out and whose revisions are not sent yet.
        var offered: (batch: [Change], reply: PendingReply)?
        let window: RevWindow?
        if case .changes = mode {
            let reporter = self.reporter
            window = RevWindow(capacity: batchSize, connection: connection) {
                reporter.onRevisionsSent($0)
            }
        } else { window = nil }
        // However the feed ends, what it queued is dropped with it.
        defer { window?.close() }
        // Completes the oldest batches until at most `keep` are in flight.
        func settle(keeping keep: Int = 0) async throws(ReplicationError) {
            if let window { try await window.drain() }
            while inFlight.count > keep {
                let oldest = inFlight.removeFirst()
                try await oldest.task.value.get()
                do { try await batchDone(oldest.last, inFlight.isEmpty && keep == 0) } catch {
                    throw ReplicationError(wrapping: error)
                }
            }
        }
        while !Task.isCancelled {
            var changes: [Change]
            // Proposing every change (no selector) offers every change: read what offering needs
            // (its remote parent, its `rev`) in the same scan of the feed.
            var read: (offers: [Offer], purges: Int64)?
            do {
                if case .propose(let remote, _) = mode, select == nil {
                    let page = try database.outgoingPage(since: position, limit: batchSize, remote: remote,
                                                         historyLimit: ReplicatorTuning.maxHistory)
                    let offers = Self.offers(of: page)
                    changes = offers.map(\.change)
                    read = (offers, page.purgeCount)
                } else {
                    changes = try withOtherLeaves(database.changes(since: position, limit: batchSize))
                }
            } catch { throw .store(error) }
            guard let last = changes.last else {
                if let window, let o = offered {
                    offered = nil
                    try await sendWanted(o.batch, reply: o.reply, window: window)
                }
                try await settle()
                if !announcedCaughtUp {
                    // The empty message tells the peer we are caught up (sent NoReply, as Couchbase does).
                    connection.send(.request(profile: profile, body: Array("[]".utf8), noReply: true)) { _ in }
                    announcedCaughtUp = true
                }
                reporter.caughtUp(.push)
                guard continuous, await database.waitForChange(after: position) else { return }
                continue
            }
            reporter.found(max(0, changes.count - counted), direction: .push)
            counted = max(0, counted - changes.count)
            var selected: [Change] = []
            for c in changes {
                do { if try select?(c) ?? true { selected.append(c) } } catch {
                    throw ReplicationError(wrapping: error)
                }
            }
            reporter.completed(changes.count - selected.count)
            if let window {
                // The next batch is offered before the previous one's revisions go out, so the
                // puller's answer is back by the time the window has room for them.
                let reply = selected.isEmpty ? nil : ask(selected)
                // A batch the selector emptied sends nothing: the previous one goes out now
                // rather than waiting for the next batch with a match.
                if let o = offered { try await sendWanted(o.batch, reply: o.reply, window: window) }
                offered = reply.map { (selected, $0) }
                position = last.sequence
                continue
            }
            let batch = selected
            let prefetched = read
            let work = Task { () -> Result<Void, ReplicationError> in
                guard !batch.isEmpty, case .propose(let remote, let alsoPulling) = self.mode else { return .success(()) }
                do throws(ReplicationError) {
                    try await self.propose(batch, remote: remote, alsoPulling: alsoPulling, read: prefetched)
                    return .success(())
                } catch { return .failure(error) }
            }
            inFlight.append((work, last.sequence))
            try await settle(keeping: ReplicatorTuning.pushBatchesInFlight - 1)
            position = last.sequence
        }
        for b in inFlight { b.task.cancel() }
    }

    /// `changes` with, before each document that has leaves besides its current revision
    /// (`Change.hasOtherLeaves`), an entry for each of those at the same sequence: the
    /// change feed names only the current revision, and a peer holding an older state of such
    /// a leaf (another life of the document, or a conflict's loser, still live there) would
    /// never learn how it ended.
    func withOtherLeaves(_ changes: [Change]) throws(StoreError) -> [Change] {
        let flagged = changes.filter(\.hasOtherLeaves)
        guard !flagged.isEmpty else { return changes }
        let trees = try database.revisionTrees(of: flagged)
        var out: [Change] = []
        out.reserveCapacity(changes.count + flagged.count)
        for c in changes {
            if c.hasOtherLeaves, let tree = trees[c.documentID] { out += Self.otherLeaves(of: c, in: tree).map(\.change) }
            out.append(c)
        }
        return out
    }

    /// The leaves of `change`'s document besides its current revision, as entries at its
    /// sequence. They go before the change: one may close the branch the receiver holds
    /// current, and the current revision must then meet the receiver's state after that.
    static func otherLeaves(of change: Change, in tree: RevisionTree) -> [(change: Change, node: RevisionTree.Node)] {
        tree.leaves.compactMap {
            $0.revisionID == change.revisionID ? nil
                : (Change(documentID: change.documentID, revisionID: $0.revisionID, isDeleted: $0.isDeleted, sequence: change.sequence), $0)
        }
    }

    // MARK: Active push (proposeChanges)

    /// One revision an active push offers, with what was read of it in one snapshot.
    struct Offer: Sendable {
        let change: Change
        /// What its `rev` needs; nil if no longer kept (a `norev` is sent).
        let revision: OutgoingRevision?
        /// The latest revision of the document the peer is known to have.
        let remoteParent: RevisionID?
        /// The document's current revision (proposed), or another leaf (sent unproposed).
        let isCurrent: Bool
        /// A leaf closing a branch (`RevisionTree.Node.isClosed`).
        let isClosedLeaf: Bool
        /// Whether the document still existed when read (after the purge count was taken): only
        /// then may the peer's acknowledgement be recorded unchecked.
        let wasRead: Bool
    }

    /// A page's offers: each change after the other leaves of its document.
    static func offers(of page: OutgoingPage) -> [Offer] {
        var out: [Offer] = []
        out.reserveCapacity(page.entries.count)
        for e in page.entries {
            if e.change.hasOtherLeaves, let tree = page.otherLeafTrees[e.change.documentID] {
                for (leaf, node) in otherLeaves(of: e.change, in: tree) {
                    out.append(Offer(change: leaf, revision: tree.outgoing(leaf.revisionID, historyLimit: ReplicatorTuning.maxHistory),
                                     remoteParent: e.remoteRevision, isCurrent: false, isClosedLeaf: node.isClosed, wasRead: true))
                }
            }
            out.append(Offer(change: e.change, revision: e.revision, remoteParent: e.remoteRevision, isCurrent: true,
                             isClosedLeaf: false, wasRead: true))
        }
        return out
    }

    /// The offers of selected changes, read from their trees (after the purge count).
    private func offers(of changes: [Change], remote: String) throws(StoreError) -> (offers: [Offer], purges: Int64) {
        let purges = try database.purgeCount()
        let trees = try database.revisionTrees(of: changes)
        let parents = try database.remoteRevisions(in: trees, remote: remote)
        let offers = changes.map { c in
            let tree = trees[c.documentID]
            let isCurrent = tree?.current?.revisionID == c.revisionID
            return Offer(change: c, revision: tree?.outgoing(c.revisionID, historyLimit: ReplicatorTuning.maxHistory),
                         remoteParent: parents[c.documentID], isCurrent: isCurrent,
                         isClosedLeaf: !isCurrent && tree?.nodes[c.revisionID]?.isClosed == true, wasRead: tree != nil)
        }
        return (offers, purges)
    }

    /// `read`: the changes' offers and the purge count read before them, if the caller has them.
    private func propose(_ changes: [Change], remote: String, alsoPulling: Bool,
                         read: (offers: [Offer], purges: Int64)?) async throws(ReplicationError) {
        let offers: [Offer]
        let purges: Int64
        if let read { (offers, purges) = read } else {
            do { (offers, purges) = try self.offers(of: changes, remote: remote) } catch { throw .store(error) }
        }
        // Revisions the peer is known to have (pulled from it) are not offered back.
        let unknown = offers.filter { $0.remoteParent != $0.change.revisionID }
        reporter.completed(offers.count - unknown.count)
        guard !unknown.isEmpty else { return }
        // Leaves other than the current revision are sent without a proposal: `proposeChanges`
        // is judged against the peer's current revision, which such a leaf (another life's
        // tombstone) need not continue; the peer's insert judges it with its history.
        var batch: [Offer] = [], unproposed: [Offer] = []
        for o in unknown {
            if o.isCurrent { batch.append(o) } else { unproposed.append(o) }
        }
        // They go first: one may end the life the peer holds live, after which the peer takes
        // our current revision (a tombstone beside its own) as the re-creation table allows.
        // What the peer has as its latest stays its current revision: these are not recorded.
        if !unproposed.isEmpty {
            _ = try await sendRevs(unproposed.map { ($0, []) }, noConflicts: true, closedLeavesMayBeRefused: true)
        }
        guard !batch.isEmpty else { return }
        var proposals = batch.map {
            ReplicationMessages.ProposedChange(documentID: $0.change.documentID, revisionID: $0.change.revisionID.description,
                                               remoteParent: $0.remoteParent?.description)
        }
        var statuses = try await sendProposals(proposals)
        // A 409 naming a current revision that is our ancestor only means our bookkeeping was
        // behind (e.g. the peer got it from a third peer): propose again with that parent. Only
        // the ancestors a `rev` carries count: a history cut before the peer's revision would
        // not connect to it anyway.
        var retry: [Int] = []
        for (i, s) in statuses.enumerated() {
            guard case .conflict(let cur?) = s, let curRev = try? RevisionID(cur),
                  batch[i].revision?.ancestors.contains(curRev) == true else { continue }
            proposals[i].remoteParent = cur
            retry.append(i)
        }
        if !retry.isEmpty {
            let again = try await sendProposals(retry.map { proposals[$0] })
            for (k, i) in retry.enumerated() { statuses[i] = again[k] }
        }

        var toSend: [(offer: Offer, known: [String])] = []
        var synced: [(documentID: String, revisionID: RevisionID)] = []
        var judged = 0
        for (i, (offer, status)) in zip(batch, statuses).enumerated() {
            let change = offer.change
            switch status {
            case .send:
                toSend.append((offer, proposals[i].remoteParent.map { [$0] } ?? []))
            case .alreadyHave:
                // Only documents read after `purges`: one purged before that has none, and its
                // acknowledgement must not be recorded unchecked.
                if offer.wasRead { synced.append((change.documentID, change.revisionID)) }
                judged += 1
            case .conflict:
                judged += 1
                // Pulling too: the peer's revision comes in, is resolved here, and the result
                // (a child of the peer's leaf) is pushed as a fast-forward.
                if !alsoPulling {
                    fail(change, .remote(domain: ReplicationProtocol.Domain.http, code: 409, message: "the peer has a conflicting revision"))
                }
            case .error(let code):
                judged += 1
                fail(change, .remote(domain: ReplicationProtocol.Domain.http, code: code, message: "proposeChanges refused"))
            }
        }
        reporter.completed(judged)
        synced += try await sendRevs(toSend, noConflicts: true, pulling: alsoPulling)
        let acknowledged = synced
        do { try await database.write { (d) throws(StoreError) in try d.setRemoteRevisions(acknowledged, remote: remote, purgeCountBefore: purges) } } catch { throw .store(error) }
    }

    private func sendProposals(_ proposals: [ReplicationMessages.ProposedChange]) async throws(ReplicationError) -> [ReplicationMessages.ProposalStatus] {
        let request = BLIPMessage.request(profile: ReplicationProtocol.Profile.proposeChanges,
                                          properties: [(ReplicationProtocol.Property.conflictIncludesRev, "true")],
                                          body: ReplicationMessages.encodeProposals(proposals))
        let reply: BLIPMessage
        do { reply = try await connection.send(request) } catch { throw ReplicationError(error) }
        return try ReplicationMessages.decodeProposalStatuses(reply.body, count: proposals.count)
    }

    // MARK: Passive side of a pull (changes)

    /// Offers a batch with `changes` now; `sendWanted` later sends what the puller asked for.
    private func ask(_ batch: [Change]) -> PendingReply {
        let entries = batch.map {
            ReplicationMessages.ChangeEntry(sequence: .int($0.sequence), documentID: $0.documentID,
                                            revisionID: $0.revisionID.description, deletedFlags: $0.isDeleted ? 1 : 0)
        }
        return PendingReply.send(.request(profile: ReplicationProtocol.Profile.changes, body: ReplicationMessages.encodeChanges(entries)), on: connection)
    }

    /// Queues the revisions of an offered batch that the puller wants on the window, which sends
    /// them as slots free up; returns once they are queued (their answers come back through it).
    private func sendWanted(_ batch: [Change], reply pending: PendingReply, window: RevWindow) async throws(ReplicationError) {
        let reply: BLIPMessage
        do { reply = try await pending.value } catch { throw ReplicationError(error) }
        try window.check()
        let answers = try ReplicationMessages.decodeChangeAnswers(reply.body, count: batch.count)
        // Labeled as `revMessages` takes them: an unlabeled array was converted element by
        // element at run time (a dynamic cast per tuple).
        var toSend: [(change: Change, known: [String], sequence: JSONValue)] = []
        var judged = 0
        for (change, answer) in zip(batch, answers) {
            switch answer {
            case .send(let known): toSend.append((change, known, .int(change.sequence)))
            case .skip: judged += 1
            case .error(let code):
                judged += 1
                fail(change, .remote(domain: ReplicationProtocol.Domain.http, code: code, message: "changes entry refused"))
            }
        }
        reporter.completed(judged)
        let revisions: [OutgoingRevision?]
        do {
            revisions = try database.outgoingRevisions(of: toSend.map(\.change), historyLimit: ReplicatorTuning.maxHistory)
        } catch { throw .store(error) }
        let (messages, sent) = revMessages(toSend, revisions: revisions, noConflicts: false)
        guard !messages.isEmpty else { return }
        let sentChanges = sent.map { toSend[$0].change }
        // Queued while the previous batch's revisions are still going out; sent from the loop.
        try await window.waitForRoom()
        window.send(messages) { [self] i, result in
            switch result {
            case .success: pushed(CollectionOfOne(sentChanges[i]))
            case .failure(.errorResponse(let domain, let code, let message)):
                fail(sentChanges[i], .remote(domain: domain, code: code, message: message))
            case .failure: break   // the window ends the feed with it
            }
        }
    }

    // MARK: Sending revisions

    /// Sends the revisions and waits for every reply; returns those the peer stored. A refused
    /// revision is a document event; a lost connection ends the batch with an error.
    /// `pulling`: the pull side runs too; a 409 for a revision then means the peer holds a
    /// conflicting one that the pull brings in and resolves here (the proposal passed because
    /// the peer's current revision was a deletion the insert then judged) — not a failure.
    /// `closedLeavesMayBeRefused`: a 409 for a closed leaf (`RevisionTree.Node.isClosed`) means
    /// the peer never had the branch it closes (Sync Gateway refuses such a tombstone in
    /// no-conflicts mode), so there was nothing to close there — not a failure either. Which
    /// peers hold a loser cannot be known here (this peer may have pushed it, or a third one may
    /// have), so every closed leaf is sent and the peer's answer decides (docs/reliability.md).
    private func sendRevs(_ items: [(offer: Offer, known: [String])], noConflicts: Bool, pulling: Bool = false,
                          closedLeavesMayBeRefused: Bool = false) async throws(ReplicationError) -> [(documentID: String, revisionID: RevisionID)] {
        let (messages, sentIndexes) = revMessages(items.map { ($0.offer.change, $0.known, JSONValue.int($0.offer.change.sequence)) },
                                                  revisions: items.map(\.offer.revision), noConflicts: noConflicts)
        let sent = sentIndexes.map { items[$0].offer }
        reporter.onRevisionsSent(messages.count)
        let results = await connection.sendAll(messages)
        var stored: [(documentID: String, revisionID: RevisionID)] = []
        var pushedChanges: [Change] = []
        pushedChanges.reserveCapacity(sent.count)
        // Reported together, also when a failure below ends the batch early.
        defer { pushed(pushedChanges) }
        for (offer, result) in zip(sent, results) {
            let change = offer.change
            switch result {
            case .success:
                stored.append((change.documentID, change.revisionID))
                pushedChanges.append(change)
            case .failure(.errorResponse(let domain, let code, let message)):
                let error = ReplicationError.remote(domain: domain, code: code, message: message)
                // A refusal that may pass (the peer's disk is full) ends the session, so this
                // batch is not checkpointed past and is proposed again when it reconnects.
                if error.isTransient { throw error }
                if pulling && code == 409 {
                    logger.debug("revision left for the pull to resolve", metadata: ["doc": "\(change.documentID)"])
                    reporter.completed(1)
                    continue
                }
                if closedLeavesMayBeRefused && code == 409, offer.isClosedLeaf {
                    logger.debug("closed branch unknown to the peer", metadata: ["doc": "\(change.documentID)"])
                    reporter.completed(1)
                    continue
                }
                fail(change, error)
            case .failure(let e):
                throw ReplicationError(e)
            }
        }
        return stored
    }

    /// Builds the `rev` messages of these changes from what was read of their revisions
    /// (`revisions[i]` for `items[i]`); a revision no longer kept (superseded and pruned since
    /// it was listed) is answered `norev` at once (the newer one comes in a later batch).
    /// Returns the messages and the indexes of the items they carry, in order.
    private func revMessages(_ items: [(change: Change, known: [String], sequence: JSONValue)], revisions: [OutgoingRevision?],
                             noConflicts: Bool) -> ([BLIPMessage], [Int]) {
        var messages: [BLIPMessage] = []
        var sent: [Int] = []
        messages.reserveCapacity(items.count)
        sent.reserveCapacity(items.count)
        for (i, (change, known, sequence)) in items.enumerated() {
            let id = change.documentID
            if let m = RevMessage.make(revisions[i], documentID: id, revisionID: change.revisionID, knownRevisions: known,
                                       sequence: sequence, noConflicts: noConflicts) {
                messages.append(m)
                sent.append(i)
            } else {
                connection.send(RevMessage.makeNoRev(documentID: id, revisionID: change.revisionID.description, sequence: sequence,
                                                     status: 410, reason: "revision superseded")) { _ in }
                reporter.completed(1)
            }
        }
        return (messages, sent)
    }

    private func pushed<C: RandomAccessCollection<Change>>(_ changes: C) {
        reporter.events(.pushed, count: changes.count) { i in
            let change = changes[changes.index(changes.startIndex, offsetBy: i)]
            return DocumentEvent(direction: .push, documentID: change.documentID, revisionID: change.revisionID.description,
                                 isDeleted: change.isDeleted, kind: .pushed)
        }
        reporter.completed(changes.count)
    }

    private func fail(_ change: Change, _ error: ReplicationError) {
        logger.info("document not pushed", metadata: ["doc": "\(change.documentID)", "error": "\(error)"])
        reporter.event(DocumentEvent(direction: .push, documentID: change.documentID, revisionID: change.revisionID.description,
                                     isDeleted: change.isDeleted, kind: .failed(error)))
        reporter.completed(1)
    }
}
