/// Replicated revisions: stored with their histories, exactly as given (Protocol/revisions.md,
/// "Revision tree").
extension WriteTransaction {
    // MARK: - Replicated revisions

    func insert(_ r: ReplicatedRevision, remote: Int?, resolver: ConflictResolver?,
                allowConflicts: Bool = true) throws(StoreError) -> InsertOutcome {
        try Document.validateID(r.documentID)
        guard !r.history.isEmpty else { throw .brokenHistory(reason: "empty history") }
        var history: [RevisionID] = []
        history.reserveCapacity(r.history.count)
        for text in r.history { history.append(try RevisionID(text)) }
        guard r.body.count <= options.maxDocumentSize else { throw .tooLarge(limit: options.maxDocumentSize) }
        let scanned = try JSONScanner.scan(r.body, maxDepth: options.maxJSONDepth, capture: context.typeKeyBytes)
        guard scanned.top == .object else { throw .notAnObject }
        // Only a body with a `_`-key (or an escaped key) can carry `_attachments` or hide the
        // type key: the others, nearly all of them, are not parsed.
        var type = scanned.captured
        if scanned.reservedKey || context.typeKeyBytes.isEmpty {
            let props = try JSONParser.parseObject(r.body)
            try checkReplicatedAttachments(props)
            type = Self.documentType(in: props, path: context.typePath)
        }

        if assumeNewDocuments && context.validators.isEmpty {
            if let outcome = try insertIfNew(r.documentID, history: history, deleted: r.isDeleted, body: r.body,
                                             type: type, remote: remote) {
                return outcome
            }
            assumeNewDocuments = false
        }
        let stored = try load(r.documentID)
        var tree = stored?.tree ?? RevisionTree()
        let previous = tree.current
        let result = try tree.insert(history: history, deleted: r.isDeleted, body: r.body)
        let rev = history[0]
        if case .noop = result {
            if let remote, let stored, tree.remoteRevisions[remote] != rev {
                tree.setRemoteRevision(rev, remote: remote)
                try storeQuietly(r.documentID, key: stored.key, tree: &tree)
            }
            return InsertOutcome(status: .noop, current: previous?.revisionID, conflictedWith: nil, resolved: false, sequence: nil)
        }

        let previousDoc: Document? = try previous.flatMap { n throws(StoreError) in
            n.isDeleted ? nil : try document(r.documentID, node: n, sequence: stored?.sequence ?? 0)
        }
        if !context.validators.isEmpty {
            var props = try JSONParser.parseObject(r.body)
            props["_deleted"] = nil
            try validate(r.documentID, rev: rev, body: props, deleted: r.isDeleted, source: .replicated, current: previousDoc)
        }

        var conflictedWith: RevisionID?
        if let prev = previous, tree.isLeaf(prev.revisionID), !tree.isAncestor(prev.revisionID, of: rev),
           Self.conflicts(prev: prev, incoming: rev, deleted: r.isDeleted, in: tree) {
            conflictedWith = prev.revisionID
            // A passive peer never stores a conflict from the wire (Protocol/revisions.md,
            // "Convergence rules", rule 1).
            if !allowConflicts { throw .conflict(documentID: r.documentID) }
        }
        var resolved = false
        if let local = conflictedWith, let resolver,
           let resolution = try decideKeepingRevision(tree, documentID: r.documentID, local: local, remote: rev, resolver: resolver) {
            try apply(resolution, to: &tree, documentID: r.documentID, local: local, remote: rev)
            resolved = true
        }
        if let remote { tree.setRemoteRevision(rev, remote: remote) }
        let seq = try store(r.documentID, key: stored?.key, tree: &tree,
                            typeHint: TypeHint(revision: rev, type: type))
        return InsertOutcome(status: .inserted, current: tree.current?.revisionID, conflictedWith: conflictedWith,
                             resolved: resolved, sequence: seq)
    }

    /// Stores a revision as a new document — what the general path does when no document has
    /// the ID — and returns nil, having written nothing, if one has. Most revisions of a bulk
    /// transfer are of documents not here yet; for them the INSERT's own uniqueness check
    /// replaces a lookup that finds nothing (a receiver's second-largest store cost).
    private func insertIfNew(_ id: String, history: [RevisionID], deleted: Bool, body: [UInt8], type: String?,
                             remote: Int?) throws(StoreError) -> InsertOutcome? {
        var tree = RevisionTree()
        _ = try tree.insert(history: history, deleted: deleted, body: body)
        let rev = history[0]
        if let remote { tree.setRemoteRevision(rev, remote: remote) }
        guard let seq = try store(id, key: nil, tree: &tree, typeHint: TypeHint(revision: rev, type: type), onlyIfNew: true) else {
            return nil
        }
        return InsertOutcome(status: .inserted, current: tree.current?.revisionID, conflictedWith: nil, resolved: false, sequence: seq)
    }

    /// What `resolver` decides for a conflict the insert made, or nil when it declined (a
    /// custom resolver threw, or answered with another database's document): the revision is
    /// kept all the same, with the conflict, and the refusal is logged.
    private func decideKeepingRevision(_ tree: RevisionTree, documentID: String, local: RevisionID, remote: RevisionID,
                                       resolver: ConflictResolver) throws(StoreError) -> ConflictResolution? {
        do {
            return try decide(tree, documentID: documentID, local: local, remote: remote, resolver: resolver)
        } catch {
            if error.isFatal { throw error }
            Self.logger.warning("conflict kept: the resolver declined", metadata: ["doc": "\(documentID)", "error": "\(error)"])
            return nil
        }
    }
}
