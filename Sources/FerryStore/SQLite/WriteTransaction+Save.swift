/// Local saves and deletions (with concurrency control) and purges.
extension WriteTransaction {
    // MARK: - Local saves

    enum Control {
        case concurrency(ConcurrencyControl)
        case handler(ConflictHandler)
    }

    /// Saves a local edit (or deletion) as a child of the current revision, applying
    /// concurrency control when the document changed since it was read.
    func save(_ doc: Document, deleting: Bool, control: Control) throws(StoreError) -> Document {
        try Document.validateID(doc.id)
        var doc = doc
        var prepared = try prepareBody(doc.properties)
        var deleted = deleting || prepared.deleted
        if deleting && !prepared.deleted {
            // `delete(_:)` writes an empty tombstone unless the caller kept fields explicitly.
            prepared = try prepareBody([:])
        }
        let stored = try load(doc.id)
        var tree = stored?.tree ?? RevisionTree()
        let currentNode = tree.current
        let currentDoc: Document? = try currentNode.flatMap { n throws(StoreError) in
            n.isDeleted ? nil : try document(doc.id, node: n, sequence: stored?.sequence ?? 0)
        }

        let inConflict: Bool
        switch (doc.revisionID, currentNode) {
        case (nil, nil): inConflict = false
        case (nil, let cur?): inConflict = !cur.isDeleted          // recreating over a tombstone is fine
        case (let read?, let cur?): inConflict = read != cur.revisionID
        case (_?, nil): inConflict = true                            // purged meanwhile
        }
        if inConflict {
            switch control {
            case .concurrency(.failOnConflict):
                throw .conflict(documentID: doc.id)
            case .concurrency(.lastWriteWins):
                // Deletes win (docs/store.md §6): a save over a concurrent deletion is refused; a
                // deletion over a concurrent deletion has nothing left to do.
                if let cur = currentNode, cur.isDeleted {
                    if deleted { return try document(doc.id, node: cur, sequence: stored?.sequence ?? 0) }
                    throw .conflict(documentID: doc.id)
                }
            case .handler(let handler):
                guard handler(&doc, currentDoc) else { throw .conflict(documentID: doc.id) }
                prepared = try prepareBody(doc.properties)
                deleted = deleting || prepared.deleted
                if deleting && !prepared.deleted { prepared = try prepareBody([:]) }
            }
        }
        // Deleting what never existed is an error; deleting a tombstone again changes nothing.
        if deleted && stored == nil { throw .notFound }
        if deleted, let cur = currentNode, cur.isDeleted {
            return try document(doc.id, node: cur, sequence: stored?.sequence ?? 0)
        }

        let parent = currentNode?.revisionID
        try prepareAttachments(&prepared, generation: (parent?.generation ?? 0) + 1, previous: currentDoc?.properties)
        let rev = RevisionID.make(parent: parent, deleted: deleted, canonicalBody: prepared.canonical)
        try validate(doc.id, rev: rev, body: prepared.body, deleted: deleted, source: .local, current: currentDoc)
        tree.addChild(of: parent, deleted: deleted, canonicalBody: prepared.canonical)
        if !deleted, let cur = currentNode, cur.isDeleted {
            // A re-creation supersedes every deletion this copy knows of, not only the one it
            // continues: the other tombstones (a deletion of another branch, made elsewhere)
            // are closed with it. Left open, each would be a deletion racing this edit to any
            // peer, and the deletion would win — the re-creation lost (cluster harness, seed 115).
            for leaf in tree.leaves where leaf.isDeleted && !leaf.isClosed && leaf.revisionID != rev {
                tree.addChild(of: leaf.revisionID, deleted: true, canonicalBody: RevisionTree.closedBody)
            }
        }
        let seq = try store(doc.id, key: stored?.key, tree: &tree,
                            typeHint: TypeHint(revision: rev, type: Self.documentType(in: prepared.body, path: context.typePath)))
        return Document(id: doc.id, revisionID: rev, properties: prepared.body, isDeleted: deleted, sequence: seq)
    }

    func purge(_ id: String) throws(StoreError) {
        let s = try conn.prepare("DELETE FROM docs WHERE doc_id = ?")
        s.bind(1, id)
        try s.run()
        guard conn.changes > 0 else { throw .notFound }
        try dropAcknowledged(id)
        folded.remove(id)
    }
}
