/// The document operations, run by `Writer` inside one SQLite transaction on the write
/// connection. Each operation computes the new revision tree in memory, validates, and only
/// then writes — so a refusal (bad input, conflict, validation) writes nothing even inside a
/// batch, and any SQLite error rolls the whole transaction back.
final class WriteTransaction {
    let conn: Connection
    let context: StoreContext
    private(set) var lastSequence: Int64

    init(connection: Connection, lastSequence: Int64, context: StoreContext) {
        self.conn = connection
        self.lastSequence = lastSequence
        self.context = context
    }

    var options: DatabaseOptions { context.options }

    // MARK: - Loading and storing trees

    struct StoredDoc {
        var key: Int64
        var sequence: Int64
        var tree: RevisionTree
    }

    // The statements every document write uses, looked up in the connection's cache once per
    // transaction rather than once per document (a batch writes thousands).
    private var loadStatement: Statement?
    private var loadTreeStatement: Statement?
    private var insertStatement: Statement?
    private var insertIfNewStatement: Statement?
    private var updateStatement: Statement?
    private var acknowledgedStatement: Statement?
    private var recordAcknowledgedStatement: Statement?
    private var dropAcknowledgedStatement: Statement?
    /// Documents whose trees took rows of `remote_revs` in this transaction; storing such a
    /// tree deletes the rows (the tree holds them now).
    private var folded: Set<String> = []
    /// Whether a replicated revision is first tried as a new document (`insertIfNew`): true
    /// until one turns out to exist, then false for the rest of the transaction.
    private var assumeNewDocuments = true
    /// `remoteKey` answers given in this transaction.
    private var remoteKeys: [String: Int] = [:]

    func cached(_ slot: inout Statement?, _ sql: String) throws(StoreError) -> Statement {
        if let s = slot {
            s.reset()
            return s
        }
        let s = try conn.prepare(sql)
        slot = s
        return s
    }

    func load(_ id: String) throws(StoreError) -> StoredDoc? {
        let s = try cached(&loadStatement, "SELECT doc_key, body, tree, sequence FROM docs WHERE doc_id = ?")
        defer { s.reset() }
        s.bind(1, id)
        guard try s.step() else { return nil }
        var stored = StoredDoc(key: s.int64(0), sequence: s.int64(3),
                               tree: try RevisionTreeCodec.decode(s.bytes(2), currentBody: s.bytes(1), documentID: id))
        s.reset()
        try foldAcknowledged(id, into: &stored.tree)
        return stored
    }

    /// A document's key and revision tree without its current body (the current node's body is
    /// left empty): enough for bookkeeping written back with `storeQuietly`, which never writes
    /// the current body, and cheaper than `load` (no body copied).
    func loadTree(_ id: String) throws(StoreError) -> (key: Int64, tree: RevisionTree)? {
        let s = try cached(&loadTreeStatement, "SELECT doc_key, tree FROM docs WHERE doc_id = ?")
        defer { s.reset() }
        s.bind(1, id)
        guard try s.step() else { return nil }
        let key = s.int64(0)
        var tree = try RevisionTreeCodec.decode(s.bytes(1), currentBody: [], documentID: id)
        s.reset()
        try foldAcknowledged(id, into: &tree)
        return (key, tree)
    }

    /// Applies the revisions peers acknowledged (`AcknowledgedRevisions`) to a tree loaded for
    /// a write, remembering to delete their rows when it is stored.
    private func foldAcknowledged(_ id: String, into tree: inout RevisionTree) throws(StoreError) {
        let s = try cached(&acknowledgedStatement, AcknowledgedRevisions.selectSQL)
        if try AcknowledgedRevisions.apply(s, documentID: id, to: &tree) { folded.insert(id) }
    }

    /// Deletes `id`'s `remote_revs` rows if its stored tree now holds them.
    private func dropFolded(_ id: String) throws(StoreError) {
        guard !folded.isEmpty, folded.remove(id) != nil else { return }
        try dropAcknowledged(id)
    }

    private func dropAcknowledged(_ id: String) throws(StoreError) {
        let s = try cached(&dropAcknowledgedStatement, AcknowledgedRevisions.deleteSQL)
        s.bind(1, id)
        try s.run()
    }

    /// Records that `remote` has these revisions, without touching the document rows. With
    /// `purgesBefore` — `purgeCount()` read before the revisions were — and no purge since,
    /// every document is known to exist and the per-row existence check is skipped.
    func recordAcknowledged(_ revisions: [(documentID: String, revisionID: RevisionID)], remote: Int,
                            purgesBefore: Int64? = nil) throws(StoreError) {
        let unchecked = try purgesBefore.map { (n) throws(StoreError) in try purgeCount() == n } ?? false
        let s = unchecked ? try conn.prepare(AcknowledgedRevisions.recordUncheckedSQL)
                          : try cached(&recordAcknowledgedStatement, AcknowledgedRevisions.recordSQL)
        for (id, rev) in revisions {
            s.bind(1, id)
            s.bind(2, remote)
            s.bind(3, rev.description)
            try s.run()
            s.reset()
        }
    }

    /// The type (for `docs.doc_type`) a revision already known to the caller has, so `store`
    /// need not find it in the body again.
    struct TypeHint {
        var revision: RevisionID
        var type: String?
    }

    /// Prunes, then writes the tree and its current revision with a new sequence. `typeHint`
    /// gives the type of the revision the caller just added; if another one is current (a
    /// conflict, a resolution) the type is read from the current body.
    @discardableResult
    func store(_ id: String, key: Int64?, tree: inout RevisionTree, typeHint: TypeHint? = nil) throws(StoreError) -> Int64 {
        // Without `onlyIfNew` a result is always returned (a failed write throws).
        try store(id, key: key, tree: &tree, typeHint: typeHint, onlyIfNew: false) ?? lastSequence
    }

    /// `store`; with `onlyIfNew` (and no key) the row is inserted only if no document has the
    /// ID, and nil is returned, nothing written, if one has.
    func store(_ id: String, key: Int64?, tree: inout RevisionTree, typeHint: TypeHint?, onlyIfNew: Bool) throws(StoreError) -> Int64? {
        tree.prune(maxDepth: options.maxRevisionTreeDepth)
        let leaves = tree.unsortedLeaves
        guard let cur = RevisionTree.winner(of: leaves) else { throw .corruptRevisionTree(documentID: id) }
        let blob = RevisionTreeCodec.encode(tree, currentInRow: cur.revisionID)
        let type: String?
        if let typeHint, typeHint.revision == cur.revisionID {
            type = typeHint.type
        } else {
            type = try documentType(of: cur.body ?? Self.emptyObject, documentID: id)
        }
        lastSequence += 1
        let s: Statement
        if let key {
            s = try cached(&updateStatement, "UPDATE docs SET rev_id = ?, deleted = ?, conflicted = ?, sequence = ?, body = ?, tree = ?, doc_type = ? WHERE doc_key = ?")
            s.bind(8, key)
        } else if onlyIfNew {
            s = try cached(&insertIfNewStatement, "INSERT INTO docs (rev_id, deleted, conflicted, sequence, body, tree, doc_type, doc_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (doc_id) DO NOTHING")
            s.bind(8, id)
        } else {
            s = try cached(&insertStatement, "INSERT INTO docs (rev_id, deleted, conflicted, sequence, body, tree, doc_type, doc_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            s.bind(8, id)
        }
        if let type { s.bind(7, type) } else { s.bindNull(7) }
        s.bind(1, cur.revisionID.description)
        s.bind(2, cur.isDeleted)
        // Bit 0: live conflicts; bit 1: leaves besides the current one (`Change`).
        let otherOpen = leaves.contains { $0.revisionID != cur.revisionID }
        s.bind(3, (RevisionTree.conflicts(among: leaves).isEmpty ? 0 : 1) | (otherOpen ? 2 : 0))
        s.bind(4, lastSequence)
        s.bindText(5, cur.body ?? Self.emptyObject)
        s.bindBlob(6, blob)
        try s.run()
        if onlyIfNew && conn.changes == 0 {
            lastSequence -= 1
            return nil
        }
        try dropFolded(id)
        return lastSequence
    }

    /// Writes a tree whose current revision did not change (remote bookkeeping) without a new
    /// sequence: nothing about the document needs replicating.
    func storeQuietly(_ id: String, key: Int64, tree: inout RevisionTree) throws(StoreError) {
        guard let cur = RevisionTree.winner(of: tree.unsortedLeaves) else { throw .corruptRevisionTree(documentID: id) }
        let s = try conn.prepare("UPDATE docs SET tree = ? WHERE doc_key = ?")
        s.bindBlob(1, RevisionTreeCodec.encode(tree, currentInRow: cur.revisionID))
        s.bind(2, key)
        try s.run()
        try dropFolded(id)
    }

    static let emptyObject: [UInt8] = [UInt8(ascii: "{"), UInt8(ascii: "}")]

    /// The value `docs.doc_type` holds for a body: the type key's value if it is a string,
    /// else nil — what `json_extract(body, <type path>)` gives where it is text.
    func documentType(of body: [UInt8], documentID: String) throws(StoreError) -> String? {
        if !context.typeKeyBytes.isEmpty {
            let scan = try JSONScanner.scan(body, maxDepth: options.maxJSONDepth, capture: context.typeKeyBytes)
            if !scan.reservedKey { return scan.captured }
        }
        return Self.documentType(in: try Self.properties(of: body, documentID: documentID), path: context.typePath)
    }

    /// The string at a dotted path of parsed properties.
    static func documentType(in props: [String: JSONValue], path: [String]) -> String? {
        guard let first = path.first else { return nil }
        var value = props[first]
        for segment in path.dropFirst() { value = value?.objectValue?[segment] }
        return value?.stringValue
    }

    /// The document value of one node of a tree (its body parsed).
    func document(_ id: String, node: RevisionTree.Node, sequence: Int64) throws(StoreError) -> Document {
        let props = try Self.properties(of: node.body ?? Self.emptyObject, documentID: id)
        return Document(id: id, revisionID: node.revisionID, properties: props, isDeleted: node.isDeleted, sequence: sequence)
    }

    /// Parses a stored body; stored bodies were validated on the way in, so failure is damage.
    static func properties(of body: [UInt8], documentID: String) throws(StoreError) -> [String: JSONValue] {
        do {
            return try JSONParser.parseObject(body)
        } catch {
            throw .corruptRevisionTree(documentID: documentID)
        }
    }

    // MARK: - Bodies

    /// Checks and canonicalises a body for a local save: `_deleted: true` makes it a deletion
    /// (and is not part of the body); `_attachments` is allowed; other `_` keys are refused.
    func prepareBody(_ props: [String: JSONValue]) throws(StoreError) -> (body: [String: JSONValue], canonical: [UInt8], deleted: Bool) {
        var body = props
        var deleted = false
        for key in props.keys where key.utf8.first == UInt8(ascii: "_") {
            switch key {
            case "_attachments": continue
            case "_deleted":
                guard case .bool(let b) = props[key] else { throw .reservedProperty(key) }
                deleted = b
                body[key] = nil
            default: throw .reservedProperty(key)
            }
        }
        let canonical = CanonicalJSON.encode(body)
        guard canonical.count <= options.maxDocumentSize else { throw .tooLarge(limit: options.maxDocumentSize) }
        return (body, canonical, deleted)
    }

    static func changedKeys(from old: [String: JSONValue]?, to new: [String: JSONValue]) -> [String] {
        let old = old ?? [:]
        var keys = Set(old.keys)
        keys.formUnion(new.keys)
        return keys.filter { old[$0] != new[$0] }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    func validate(_ id: String, rev: RevisionID, body: [String: JSONValue], deleted: Bool,
                  source: ProposedRevision.Source, current: Document?) throws(StoreError) {
        guard !context.validators.isEmpty else { return }
        let proposed = ProposedRevision(documentID: id, revisionID: rev, properties: body, isDeletion: deleted, source: source)
        let ctx = ValidationContext(currentRevision: current, changedKeys: Self.changedKeys(from: current?.properties, to: body))
        for v in context.validators {
            if case .reject(let message, let status) = v.validate(proposed, ctx) {
                throw .rejected(status: status, message: message)
            }
        }
    }

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
            try checkReplicatedAttachments(props, generation: history[0].generation)
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
        if let local = conflictedWith, let resolver {
            try resolve(&tree, documentID: r.documentID, local: local, remote: rev, resolver: resolver)
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

    // MARK: - Conflict resolution (docs/store.md §4; Protocol/revisions.md, "Storing a resolution")

    /// Resolves `local` against `remote` in `tree`. The remote branch always continues, so the
    /// result is a fast-forward for the peer that sent it: a new body becomes a child of the
    /// remote leaf; the local leaf, if live and some remote has it, is closed by a tombstone
    /// child with `RevisionTree.closedBody` (never current while another leaf is open, and not a
    /// deletion to the rule), else its branch is purged back to the fork.
    /// Every revision made here has an ID computed from its parent and body only, so two stores
    /// resolving the same conflict the same way make the same revisions.
    @discardableResult
    func resolve(_ tree: inout RevisionTree, documentID: String, local: RevisionID, remote: RevisionID,
                 resolver: ConflictResolver) throws(StoreError) -> RevisionID? {
        guard local != remote, tree.isLeaf(local), tree.isLeaf(remote),
              let l = tree.nodes[local], let r = tree.nodes[remote] else {
            throw .invalidArgument("\(local) and \(remote) are not two leaves of \(documentID)")
        }
        let localDoc = l.isDeleted ? nil : try document(documentID, node: l, sequence: 0)
        let remoteDoc = r.isDeleted ? nil : try document(documentID, node: r, sequence: 0)
        let conflict = Conflict(documentID: documentID, local: localDoc, remote: remoteDoc,
                                localRevisionID: local, remoteRevisionID: remote)
        // Both deleted: the default keeps the remote tombstone without asking (Protocol/revisions.md,
        // "Storing a resolution").
        let resolution: ConflictResolution = (l.isDeleted && r.isDeleted && resolver.isDefault) ? .remote : resolver.resolve(conflict)

        var created: RevisionID?
        switch resolution {
        case .remote:
            break
        case .local:
            // The local body, continued from the remote leaf: its attachments' `revpos` counted
            // generations of the local branch, which may be past this revision's; each is
            // worked out again against the remote parent (kept if the parent has the same blob).
            var props = try Self.properties(of: l.body ?? Self.emptyObject, documentID: documentID)
            Self.forgetRevpos(&props)
            var prepared = try prepareBody(props)
            try prepareAttachments(&prepared, generation: remote.generation + 1,
                                   previous: r.body.flatMap { try? JSONParser.parseObject($0) })
            created = tree.addChild(of: remote, deleted: l.isDeleted, canonicalBody: prepared.canonical)
        case .merged(let props):
            var prepared = try prepareBody(props)
            try prepareAttachments(&prepared, generation: remote.generation + 1,
                                   previous: r.body.flatMap { try? JSONParser.parseObject($0) })
            created = tree.addChild(of: remote, deleted: prepared.deleted, canonicalBody: prepared.canonical)
        case .delete where resolver.isDefault && (l.isDeleted || r.isDeleted):
            // The deletion already there wins as it is, whichever side it came from, and the
            // live leaf is closed (below for a local one): both peers end with the same two
            // leaves. A new deletion of the live leaf instead — LiteCore's fast-forward for
            // the peer — would be a second deletion of the same conflict, made only by the
            // peer where the deletion was local; a re-creation continuing the first deletion
            // then met it as a deletion racing an edit, and lost.
            if !r.isDeleted { tree.addChild(of: remote, deleted: true, canonicalBody: RevisionTree.closedBody) }
            if !l.isDeleted { tree.addChild(of: local, deleted: true, canonicalBody: RevisionTree.closedBody) }
            return nil
        case .delete:
            if !(r.isDeleted && resolver.isDefault) {
                created = tree.addChild(of: remote, deleted: true, canonicalBody: Self.emptyObject)
            }
        }
        // The losing branch goes, as in LiteCore (Protocol/revisions.md, "Storing a resolution"): purged back to the fork, so
        // the only leaves left are the remote branch's and the document's current revision is
        // the one its peer has; but if some remote has the losing leaf as its latest (it could
        // send it again), it is closed with a tombstone instead.
        if tree.remoteRevisions.values.contains(local) {
            if !l.isDeleted { tree.addChild(of: local, deleted: true, canonicalBody: RevisionTree.closedBody) }
        } else {
            tree.purgeBranch(leaf: local, keeping: remote)
        }
        return created
    }

    /// Whether a new leaf `incoming` (already in `tree`) conflicts with the current revision
    /// `prev`, which is a leaf and not its ancestor. Every peer must answer the same for the
    /// same two branches, whichever it received first and whether it resolves (an active
    /// puller) or refuses (a passive peer):
    /// - two live leaves conflict (concurrent edits, or concurrent creations);
    /// - two tombstones do not: the document is deleted either way;
    /// - a closed branch (`RevisionTree.Node.isClosed`) conflicts with nothing;
    /// - a tombstone and a live leaf conflict only if their branches share a revision (an edit
    ///   racing a deletion: resolved, the deletion wins). Branches with no common revision are
    ///   two lives of the document: a re-creation after a deletion (Protocol/replication.md, "proposeChanges"), or the old life's
    ///   tombstone arriving late; the live one is current, and nothing is resolved.
    static func conflicts(prev: RevisionTree.Node, incoming: RevisionID, deleted: Bool, in tree: RevisionTree) -> Bool {
        // A closed branch (a loser some peer already resolved) contends with nothing.
        if prev.isClosed || tree.nodes[incoming]?.isClosed == true { return false }
        if prev.isDeleted && deleted { return false }
        if !prev.isDeleted && !deleted { return true }
        let ancestry = Set(tree.history(of: prev.revisionID))
        return tree.history(of: incoming).contains { ancestry.contains($0) }
    }

    /// Removes `revpos` from every `_attachments` entry (to be worked out again).
    static func forgetRevpos(_ props: inout [String: JSONValue]) {
        guard case .object(var members)? = props["_attachments"] else { return }
        for (name, entry) in members {
            guard case .object(var meta) = entry else { continue }
            meta["revpos"] = nil
            members[name] = .object(meta)
        }
        props["_attachments"] = .object(members)
    }

    /// Resolves every visible conflict of a document: repeatedly the current revision (local)
    /// against the highest other live leaf (remote). Deterministic for a given tree.
    func resolveAll(_ id: String, resolver: ConflictResolver) throws(StoreError) -> Int {
        guard let stored = try load(id) else { throw .notFound }
        var tree = stored.tree
        var rounds = 0
        while let cur = tree.current, let other = tree.conflicts.first {
            try resolve(&tree, documentID: id, local: cur.revisionID, remote: other, resolver: resolver)
            rounds += 1
        }
        if rounds > 0 { try store(id, key: stored.key, tree: &tree) }
        return rounds
    }

    func resolveOne(_ id: String, local: RevisionID, remote: RevisionID, resolver: ConflictResolver) throws(StoreError) -> RevisionID? {
        guard let stored = try load(id) else { throw .notFound }
        var tree = stored.tree
        let created = try resolve(&tree, documentID: id, local: local, remote: remote, resolver: resolver)
        try store(id, key: stored.key, tree: &tree)
        return created
    }

    // MARK: - Remotes

    /// `meta.purges` (see `Database.purgeCount()`).
    func purgeCount() throws(StoreError) -> Int64 {
        try Self.purgeCount(conn)
    }

    static func purgeCount(_ conn: Connection) throws(StoreError) -> Int64 {
        let s = try conn.prepare(AcknowledgedRevisions.purgesSQL)
        defer { s.reset() }
        return try s.step() ? s.int64(0) : 0
    }

    /// The number of a remote (peer address / replication ID), created on first use.
    func remoteKey(_ address: String) throws(StoreError) -> Int {
        // A batch of pulled revisions asks once per revision; the answer cannot change within
        // the transaction (and a rolled-back one takes this cache with it).
        if let key = remoteKeys[address] { return key }
        let q = try conn.prepare("SELECT remote_key FROM remotes WHERE address = ?")
        q.bind(1, address)
        let key: Int
        if try q.step() {
            key = q.int(0)
            q.reset()
        } else {
            q.reset()
            let i = try conn.prepare("INSERT INTO remotes (address) VALUES (?)")
            i.bind(1, address)
            try i.run()
            key = Int(conn.lastInsertRowID)
        }
        remoteKeys[address] = key
        return key
    }
}
