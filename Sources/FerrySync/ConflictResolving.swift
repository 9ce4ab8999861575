import FerryStore

/// Runs a custom conflict resolver against the database and reports the outcome as a document
/// event. A resolver that throws or answers for another document leaves the conflict stored
/// (the next run, or `stop()`, tries again).
enum ConflictResolving {
    @discardableResult
    static func resolve(database: Database, documentID: String, local: RevisionID, remote: RevisionID,
                        using custom: @Sendable (Conflict) throws -> Document?, reporter: Reporter) -> Bool {
        do {
            let localDoc = try database.revision(local, of: documentID)
            let remoteDoc = try database.revision(remote, of: documentID)
            let conflict = Conflict(documentID: documentID,
                                    local: localDoc?.isDeleted == false ? localDoc : nil,
                                    remote: remoteDoc?.isDeleted == false ? remoteDoc : nil,
                                    localRevisionID: local, remoteRevisionID: remote)
            let resolution: ConflictResolution
            do { resolution = try ReplicationConflictResolver.resolution(for: conflict, using: custom) } catch {
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
            reporter.event(DocumentEvent(direction: .pull, documentID: documentID, revisionID: remote.description,
                                         isDeleted: false, kind: .failed(.store(error))))
            return false
        }
    }

    /// Resolves every conflict left in the database (from an earlier run) with `resolver`:
    /// the current revision against each other live leaf.
    static func resolveAll(database: Database, resolver: ReplicationConflictResolver?, reporter: Reporter) {
        guard let ids = try? database.conflictedDocumentIDs() else { return }
        for id in ids {
            if let custom = resolver?.resolve {
                while let tree = try? database.revisionTree(of: id), let cur = tree.current?.revisionID, let other = tree.conflicts.first {
                    guard resolve(database: database, documentID: id, local: cur, remote: other, using: custom, reporter: reporter) else { break }
                }
            } else if (try? database.resolveConflicts(of: id)) != nil {
                reporter.event(DocumentEvent(direction: .pull, documentID: id, revisionID: nil, isDeleted: false, kind: .conflictResolved))
            }
        }
    }
}
