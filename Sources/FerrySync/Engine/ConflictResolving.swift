import FerryStore
import Logging

/// Runs a custom conflict resolver against the database and reports the outcome as a document
/// event (and, for a failure, in the log). A resolver that throws or answers with a document
/// of another database leaves the conflict stored (the next start, or `stop()`, tries again).
enum ConflictResolving {
    @discardableResult
    static func resolve(database: Database, documentID: String, local: RevisionID, remote: RevisionID,
                        using custom: @Sendable (Conflict) throws -> Document?, reporter: Reporter, logger: Logger) -> Bool {
        do {
            let localDoc = try database.revision(local, of: documentID)
            let remoteDoc = try database.revision(remote, of: documentID)
            let conflict = Conflict(documentID: documentID,
                                    local: localDoc?.isDeleted == false ? localDoc : nil,
                                    remote: remoteDoc?.isDeleted == false ? remoteDoc : nil,
                                    localRevisionID: local, remoteRevisionID: remote)
            let resolution: ConflictResolution
            do {
                let answer = try ReplicationConflictResolver.resolution(for: conflict, in: database.uuid, using: custom)
                if let warning = answer.warning { logger.warning("\(warning)", metadata: ["doc": "\(documentID)"]) }
                resolution = answer.resolution
            } catch {
                logger.warning("conflict left for the next start", metadata: ["doc": "\(documentID)", "error": "\(error)"])
                reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: remote.description,
                                             isDeleted: false, kind: .failed(error)))
                return false
            }
            let created = try database.resolveConflict(documentID: documentID, local: local, remote: remote,
                                                       using: .custom { _ in resolution })
            reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: (created ?? remote).description,
                                         isDeleted: resolution == .delete, kind: .conflictResolved))
            return true
        } catch {
            logger.warning("could not store a conflict's resolution", metadata: ["doc": "\(documentID)", "error": "\(error)"])
            reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: remote.description,
                                         isDeleted: false, kind: .failed(.store(error))))
            return false
        }
    }

    /// Resolves every conflict left in the database (from an earlier run) with `resolver`:
    /// the current revision against each other live leaf.
    static func resolveAll(database: Database, resolver: ReplicationConflictResolver?, reporter: Reporter, logger: Logger) {
        // Under `keep` only a custom resolver the application configured settles anything.
        guard resolver?.resolve != nil || database.conflictPolicy == .resolve,
              let ids = try? database.conflictedDocumentIDs() else { return }
        for id in ids {
            if let custom = resolver?.resolve {
                while let tree = try? database.revisionTree(of: id), let cur = tree.current?.revisionID, let other = tree.conflicts.first {
                    guard resolve(database: database, documentID: id, local: cur, remote: other, using: custom, reporter: reporter, logger: logger) else { break }
                }
            } else if (try? database.resolveConflicts(of: id)) != nil {
                reporter.event(DocumentEvent(direction: .pull, documentID: id, revisionID: nil, isDeleted: false, kind: .conflictResolved))
            }
        }
    }
}
