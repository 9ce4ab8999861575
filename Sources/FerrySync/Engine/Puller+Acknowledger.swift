import FerryBLIP
import FerryStore
import Logging

extension Puller {
    /// Finishes each transaction's revisions once it has committed (or failed): answers their
    /// `rev`s, queues the attachments their download policy wants, reports them and ends them in
    /// the ledger — once per transaction rather than once per revision, since each of those steps
    /// costs a hop to the event loop or a lock (Protocol/replication.md, "rev": a reply means the
    /// revision is stored).
    struct Acknowledger: Sendable {
        let database: Database
        let ledger: PullLedger
        let reporter: Reporter
        let downloads: AttachmentDownloadQueue?
        /// The replicator's custom resolver, run after the commit for a conflict the insert kept
        /// (nil: the database's policy already resolved it in the transaction, or a listener).
        let customResolver: ConflictResolver?
        let logger: Logger

        /// The inserter's completion for one transaction.
        func acknowledge(_ items: [Inserter.Item], _ results: [Result<InsertOutcome, StoreError>]) {
            var answers: [(request: BLIPIncomingRequest, reply: BLIPMessage)] = []
            answers.reserveCapacity(items.count)
            var stored: [Int] = []
            stored.reserveCapacity(items.count)
            var transient: StoreError?
            // By index: a copy of each item (its revision, request and downloads) would retain and
            // release every reference in it.
            for i in items.indices {
                let wantsReply = !items[i].request.message.isNoReply
                switch results[i] {
                case .success:
                    if wantsReply { answers.append((items[i].request, .response())) }
                    if !items[i].deferred.isEmpty { downloads?.enqueue(items[i].deferred) }
                    stored.append(i)
                case .failure(let error):
                    if wantsReply {
                        answers.append((items[i].request, .errorResponse(domain: ReplicationProtocol.Domain.http, code: error.wireStatus,
                                                                     message: error.wireMessage)))
                    }
                    if error.isTransient {
                        // Disk full, I/O: the revisions must come again. The transaction stored
                        // nothing (and may have counted its revisions done): the session ends,
                        // and the next one starts from the last saved checkpoint.
                        ledger.storeFailed()
                        transient = transient ?? error
                    } else {
                        let r = items[i].revision
                        reporter.event(DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: r.history.first,
                                                     isDeleted: r.isDeleted, kind: .failed(.store(error))))
                    }
                }
            }
            BLIPIncomingRequest.respond(answers)
            reporter.events(.pulled, count: stored.count) { k in
                let r = items[stored[k]].revision
                return DocumentEvent(direction: .pull, documentID: r.documentID, revisionID: r.history.first, isDeleted: r.isDeleted,
                                     kind: .pulled)
            }
            // After the answers: a custom resolver writes a transaction of its own.
            for i in stored {
                guard case .success(let outcome) = results[i], let local = outcome.conflictedWith else { continue }
                resolve(items[i].revision, local: local, outcome: outcome)
            }
            if let transient {
                logger.warning("could not store pulled revisions; the pull restarts", metadata: ["error": "\(transient)"])
                ledger.end(with: .store(transient))
            }
            reporter.completed(items.count)
            if ledger.ended(items.count).idle { reporter.caughtUp(.pull) }
        }

        /// A pulled revision met a local one: the default rule already resolved it in the
        /// insert's transaction; a custom resolver runs now, after the commit.
        private func resolve(_ revision: ReplicatedRevision, local: RevisionID, outcome: InsertOutcome) {
            if outcome.resolved {
                reporter.event(DocumentEvent(direction: .pull, documentID: revision.documentID, revisionID: outcome.current?.description,
                                             isDeleted: false, kind: .conflictResolved))
            } else if let customResolver, let remote = try? RevisionID(revision.history.first ?? "") {
                ConflictResolving.resolve(database: database, documentID: revision.documentID, local: local, remote: remote,
                                          using: customResolver, reporter: reporter, logger: logger)
            }
        }
    }
}
