import FerryBLIP
import FerryStore
import Logging

/// Sends this database's changes to a peer: reads the change feed in batches, asks the peer
/// which revisions it wants, sends those as `rev` messages, waits until the peer has stored
/// them, then moves on — so at most one batch is ever in flight. Two modes, one per role
/// (reference §3.12):
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
    /// Runs after each batch with the last sequence it covered (the active side's checkpoint).
    let batchDone: @Sendable (Int64) async throws -> Void
    let logger: Logger

    init(database: Database, connection: BLIPConnection, mode: Mode, continuous: Bool, batchSize: Int,
         select: Selector?, reporter: Reporter, logger: Logger,
         batchDone: @escaping @Sendable (Int64) async throws -> Void = { _ in }) {
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
        if case .propose = mode { return "proposeChanges" }
        return "changes"
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
        // An active push overlaps two batches (proposing the next while the previous one's
        // revisions are in flight): a batch lost to a crash is only re-proposed, and the peer
        // answers 304 for what it already stored. A feed for a pull keeps one batch in flight,
        // so a killed puller re-fetches at most one batch.
        var inFlight: (task: Task<Result<Void, ReplicationError>, Never>, last: Int64)?
        let overlap: Bool
        if case .propose = mode { overlap = true } else { overlap = false }
        func settle() async throws(ReplicationError) {
            guard let previous = inFlight else { return }
            inFlight = nil
            try await previous.task.value.get()
            do { try await batchDone(previous.last) } catch {
                throw ReplicationError(wrapping: error)
            }
        }
        while !Task.isCancelled {
            let changes: [Change]
            do { changes = try database.changes(since: position, limit: batchSize) } catch { throw .store(error) }
            guard let last = changes.last else {
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
            let batch = selected
            let work = Task { () -> Result<Void, ReplicationError> in
                guard !batch.isEmpty else { return .success(()) }
                do throws(ReplicationError) {
                    switch self.mode {
                    case .propose(let remote, let alsoPulling): try await self.propose(batch, remote: remote, alsoPulling: alsoPulling)
                    case .changes: try await self.offer(batch)
                    }
                    return .success(())
                } catch { return .failure(error) }
            }
            try await settle()
            inFlight = (work, last.sequence)
            if !overlap { try await settle() }
            position = last.sequence
        }
        inFlight?.task.cancel()
    }

    // MARK: Active push (proposeChanges)

    private func propose(_ changes: [Change], remote: String, alsoPulling: Bool) async throws(ReplicationError) {
        let parents: [String: RevisionID]
        do { parents = try database.remoteRevisions(of: changes.map(\.documentID), remote: remote) } catch { throw .store(error) }
        // Revisions the peer is known to have (pulled from it) are not offered back.
        let batch = changes.filter { parents[$0.documentID] != $0.revisionID }
        reporter.completed(changes.count - batch.count)
        guard !batch.isEmpty else { return }
        var proposals = batch.map {
            ReplicationMessages.ProposedChange(documentID: $0.documentID, revisionID: $0.revisionID.description,
                                               remoteParent: parents[$0.documentID]?.description)
        }
        var statuses = try await sendProposals(proposals)
        // A 409 naming a current revision that is our ancestor only means our bookkeeping was
        // behind (e.g. the peer got it from a third peer): propose again with that parent.
        var retry: [Int] = []
        for (i, s) in statuses.enumerated() {
            guard case .conflict(let cur?) = s, let curRev = try? RevisionID(cur),
                  let tree = try? database.revisionTree(of: batch[i].documentID),
                  tree.isAncestor(curRev, of: batch[i].revisionID) else { continue }
            proposals[i].remoteParent = cur
            retry.append(i)
        }
        if !retry.isEmpty {
            let again = try await sendProposals(retry.map { proposals[$0] })
            for (k, i) in retry.enumerated() { statuses[i] = again[k] }
        }

        var toSend: [(change: Change, known: [String])] = []
        var synced: [(documentID: String, revisionID: RevisionID)] = []
        var judged = 0
        for (i, (change, status)) in zip(batch, statuses).enumerated() {
            switch status {
            case .send:
                toSend.append((change, proposals[i].remoteParent.map { [$0] } ?? []))
            case .alreadyHave:
                synced.append((change.documentID, change.revisionID))
                judged += 1
            case .conflict:
                judged += 1
                // Pulling too: the peer's revision comes in, is resolved here, and the result
                // (a child of the peer's leaf) is pushed as a fast-forward.
                if !alsoPulling {
                    fail(change, .remote(domain: "HTTP", code: 409, message: "the peer has a conflicting revision"))
                }
            case .error(let code):
                judged += 1
                fail(change, .remote(domain: "HTTP", code: code, message: "proposeChanges refused"))
            }
        }
        reporter.completed(judged)
        synced += try await sendRevs(toSend.map { ($0.change, $0.known, JSONValue.int($0.change.sequence)) }, noConflicts: true)
        do { try database.setRemoteRevisions(synced, remote: remote) } catch { throw .store(error) }
    }

    private func sendProposals(_ proposals: [ReplicationMessages.ProposedChange]) async throws(ReplicationError) -> [ReplicationMessages.ProposalStatus] {
        let request = BLIPMessage.request(profile: "proposeChanges", properties: [("conflictIncludesRev", "true")],
                                          body: ReplicationMessages.encodeProposals(proposals))
        let reply: BLIPMessage
        do { reply = try await connection.send(request) } catch { throw ReplicationError(error) }
        return try ReplicationMessages.decodeProposalStatuses(reply.body, count: proposals.count)
    }

    // MARK: Passive side of a pull (changes)

    private func offer(_ batch: [Change]) async throws(ReplicationError) {
        let entries = batch.map {
            ReplicationMessages.ChangeEntry(sequence: .int($0.sequence), documentID: $0.documentID,
                                            revisionID: $0.revisionID.description, deletedFlags: $0.isDeleted ? 1 : 0)
        }
        let reply: BLIPMessage
        do {
            reply = try await connection.send(.request(profile: "changes", body: ReplicationMessages.encodeChanges(entries)))
        } catch { throw ReplicationError(error) }
        let answers = try ReplicationMessages.decodeChangeAnswers(reply.body, count: batch.count)
        var toSend: [(Change, [String], JSONValue)] = []
        var judged = 0
        for (change, answer) in zip(batch, answers) {
            switch answer {
            case .send(let known): toSend.append((change, known, .int(change.sequence)))
            case .skip: judged += 1
            case .error(let code):
                judged += 1
                fail(change, .remote(domain: "HTTP", code: code, message: "changes entry refused"))
            }
        }
        reporter.completed(judged)
        _ = try await sendRevs(toSend, noConflicts: false)
    }

    // MARK: Sending revisions

    /// Sends the revisions and waits for every reply; returns those the peer stored. A refused
    /// revision is a document event; a lost connection ends the batch with an error.
    private func sendRevs(_ items: [(change: Change, known: [String], sequence: JSONValue)],
                          noConflicts: Bool) async throws(ReplicationError) -> [(documentID: String, revisionID: RevisionID)] {
        var messages: [BLIPMessage] = []
        var sent: [Change] = []
        let trees: [String: RevisionTree]
        do { trees = try database.revisionTrees(of: items.map(\.change.documentID)) } catch { throw .store(error) }
        for (change, known, sequence) in items {
            let id = change.documentID, rev = change.revisionID.description
            if let m = RevMessage.make(tree: trees[id], documentID: id, revisionID: rev, knownRevisions: known,
                                       maxHistory: 50, sequence: sequence, noConflicts: noConflicts) {
                messages.append(m)
                sent.append(change)
            } else {
                // Superseded since it was listed: the newer revision comes in a later batch.
                connection.send(RevMessage.makeNoRev(documentID: id, revisionID: rev, sequence: sequence,
                                                     status: 410, reason: "revision superseded")) { _ in }
                reporter.completed(1)
            }
        }
        reporter.onRevisionsSent(messages.count)
        let results = await connection.sendAll(messages)
        var stored: [(documentID: String, revisionID: RevisionID)] = []
        for (change, result) in zip(sent, results) {
            switch result {
            case .success:
                stored.append((change.documentID, change.revisionID))
                reporter.event(DocumentEvent(direction: .push, documentID: change.documentID,
                                             revisionID: change.revisionID.description, isDeleted: change.isDeleted, kind: .pushed))
                reporter.completed(1)
            case .failure(.errorResponse(let domain, let code, let message)):
                fail(change, .remote(domain: domain, code: code, message: message))
            case .failure(let e):
                throw ReplicationError(e)
            }
        }
        return stored
    }

    private func fail(_ change: Change, _ error: ReplicationError) {
        logger.info("document not pushed", metadata: ["doc": "\(change.documentID)", "error": "\(error)"])
        reporter.event(DocumentEvent(direction: .push, documentID: change.documentID, revisionID: change.revisionID.description,
                                     isDeleted: change.isDeleted, kind: .failed(error)))
        reporter.completed(1)
    }
}
