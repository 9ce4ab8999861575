import FerryStore
import Logging

/// Runs a replicator's custom `ConflictResolver` against the database after the commit of the
/// pulled revision that made the conflict, and reports the outcome as a document event (and, for
/// a failure, in the log). A custom resolver runs outside the insert's transaction because it
/// may throw (or answer with another database's document), and the conflict must then stay:
/// the next start, or `stop()`, tries again.
enum ConflictResolving {
    /// Resolves `local` against `remote` with `resolver`; false if the conflict stays.
    @discardableResult
    static func resolve(database: Database, documentID: String, local: RevisionID, remote: RevisionID,
                        using resolver: ConflictResolver, reporter: Reporter, logger: Logger) -> Bool {
        do throws(StoreError) {
            let created = try database.resolveConflict(documentID: documentID, local: local, remote: remote, using: resolver)
            // The document as the resolution left it, for the event (a failed read only makes
            // the event vaguer: the resolution is stored).
            let current = try? database.document(documentID, includeDeleted: true)
            reporter.event(DocumentEvent(direction: .pull, documentID: documentID,
                                         revisionID: (created ?? current?.revisionID ?? remote).description,
                                         isDeleted: current?.isDeleted ?? false, kind: .conflictResolved))
            return true
        } catch {
            logger.warning("conflict left for the next start", metadata: ["doc": "\(documentID)", "error": "\(error)"])
            reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: remote.description,
                                         isDeleted: false, kind: .failed(.store(error))))
            return false
        }
    }

    /// Resolves every conflict left in the database (from an earlier run) with `resolver`:
    /// the current revision against each other live leaf. Without a custom resolver the
    /// database's policy decides: the default rule under `resolve`, nothing under `keep`.
    static func resolveAll(database: Database, resolver: ConflictResolver?, reporter: Reporter, logger: Logger) {
        let custom = resolver.customResolver
        guard custom != nil || database.conflictPolicy == .resolve,
              let ids = try? database.conflictedDocumentIDs() else { return }
        for id in ids {
            if let custom {
                while let tree = try? database.revisionTree(of: id), let cur = tree.current?.revisionID, let other = tree.conflicts.first {
                    guard resolve(database: database, documentID: id, local: cur, remote: other, using: custom, reporter: reporter, logger: logger) else { break }
                }
            } else if (try? database.resolveConflicts(of: id)) != nil {
                reporter.event(DocumentEvent(direction: .pull, documentID: id, revisionID: nil, isDeleted: false, kind: .conflictResolved))
            }
        }
    }
}

extension Optional where Wrapped == ConflictResolver {
    /// A replicator's configured resolver when it is a custom one (run by `ConflictResolving`
    /// after the commit); nil for none or `.default`, which the database's `ConflictPolicy` runs
    /// in the insert's own transaction.
    var customResolver: ConflictResolver? { flatMap { $0.isDefault ? nil : $0 } }
}
