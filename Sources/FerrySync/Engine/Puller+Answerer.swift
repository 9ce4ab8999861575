import FerryBLIP
import FerryStore
import Logging

extension Puller {
    /// Answers the peer's "do you want these?" batches — `changes` (active and passive) and
    /// `proposeChanges` (passive) — against the database, and enters what it asks for in the
    /// ledger (Protocol/replication.md, "changes" and "proposeChanges").
    struct Answerer: Sendable {
        let database: Database
        let ledger: PullLedger
        let inserter: Inserter
        let reporter: Reporter
        let logger: Logger
        /// Whether the listed sequences are kept for a checkpoint (the active pull).
        let recordsSequences: Bool

        /// Answers one `changes` batch: which revisions to send, and the ancestors we have.
        func answerChanges(_ request: BLIPIncomingRequest) {
            let message = request.message
            do throws(ReplicationError) {
                let entries = try ReplicationMessages.decodeChanges(message.body)
                guard !entries.isEmpty else { return caughtUp(request) }
                // Unanswerable, its revisions would never be asked for.
                guard !message.isNoReply else { return }
                reporter.found(entries.count, direction: .pull)
                let answers: [ReplicationMessages.ChangeAnswer]
                do { answers = try RevFinder.answer(entries, database: database) } catch { throw .store(error) }
                enter(entries.map { ($0.documentID, $0.revisionID) }, sequences: recordsSequences ? entries.map(\.sequence) : nil,
                      wanted: answers.map { if case .send = $0 { true } else { false } })
                request.respond(properties: [(ReplicationProtocol.Property.maxHistory, String(ReplicatorTuning.maxHistory))],
                                body: ReplicationMessages.encodeChangeAnswers(answers))
            } catch { fail(request, error) }
        }

        /// Answers consecutive `proposeChanges` messages with one read of the database.
        func answerProposals(_ requests: [BLIPIncomingRequest]) {
            var batch: [(request: BLIPIncomingRequest, proposals: [ReplicationMessages.ProposedChange])] = []
            for request in requests {
                do throws(ReplicationError) {
                    let proposals = try ReplicationMessages.decodeProposals(request.message.body)
                    if proposals.isEmpty { caughtUp(request) } else if !request.message.isNoReply { batch.append((request, proposals)) }
                } catch { fail(request, error) }
            }
            guard !batch.isEmpty else { return }
            let all = batch.flatMap(\.proposals)
            reporter.found(all.count, direction: .pull)
            let statuses: [ReplicationMessages.ProposalStatus]
            do { statuses = try RevFinder.answer(all, database: database) } catch {
                for b in batch { fail(b.request, .store(error)) }
                return
            }
            var offset = 0
            var answers: [(request: BLIPIncomingRequest, reply: BLIPMessage)] = []
            answers.reserveCapacity(batch.count)
            for (request, proposals) in batch {
                let mine = Array(statuses[offset..<offset + proposals.count])
                offset += proposals.count
                enter(proposals.map { ($0.documentID, $0.revisionID) }, sequences: nil,
                      wanted: mine.map { if case .send = $0 { true } else { false } })
                let withRev = request.message.properties.bool(ReplicationProtocol.Property.conflictIncludesRev)
                answers.append((request, .response(body: ReplicationMessages.encodeProposalStatuses(mine, conflictIncludesRev: withRev))))
            }
            // One hop to the loop for all of them (a simple client proposes one revision per message).
            BLIPIncomingRequest.respond(answers)
        }

        /// Enters an answered batch in the ledger and the progress.
        private func enter(_ keys: [(documentID: String, revisionID: String)], sequences: [JSONValue]?, wanted: [Bool]) {
            let skipped = wanted.count { !$0 }
            // Entries after the caught-up marker (a continuous feed) keep it: the session is idle
            // again as soon as what they asked for is stored, which may be at once.
            let standing = ledger.requested(keys, sequences: sequences, wanted: wanted)
            // A batch of changes we already have (a peer listing back what we pushed it, as Sync
            // Gateway does) brings no revision whose transaction would save the checkpoint: ask
            // for one, so the next session does not list them again (LiteCore does the same).
            if standing.checkpointBehind && skipped == wanted.count { inserter.requestCommit() }
            reporter.caughtUp(.pull, standing.idle)
            reporter.completed(skipped)
        }

        /// The empty batch: the peer has nothing more to list (for now, if continuous).
        private func caughtUp(_ request: BLIPIncomingRequest) {
            if !request.message.isNoReply { request.respond() }
            let standing = ledger.caughtUp()
            // Listed changes that were all known (or given up on) still move the checkpoint.
            if standing.checkpointBehind { inserter.requestCommit() }
            if standing.idle { reporter.caughtUp(.pull) }
        }

        /// A batch we cannot read or answer cannot be checkpointed past, and unanswered its
        /// revisions would never come: the session ends with the error (a transient store error
        /// is retried), and the next one lists them again.
        private func fail(_ request: BLIPIncomingRequest, _ error: ReplicationError) {
            logger.warning("cannot answer \(request.message.profile ?? "")", metadata: ["error": "\(error)"])
            if case .store(let e) = error { request.respondHTTPError(e.wireStatus, e.wireMessage) }
            else { request.respondHTTPError(400, "\(error)") }
            ledger.end(with: error)
        }
    }
}
