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
    private var recordAcknowledgedManyStatement: Statement?
    private var dropAcknowledgedStatement: Statement?
    /// Documents whose trees took rows of `remote_revs` in this transaction; storing such a
    /// tree deletes the rows (the tree holds them now).
    var folded: Set<String> = []
    /// Whether a replicated revision is first tried as a new document (`insertIfNew`): true
    /// until one turns out to exist, then false for the rest of the transaction.
    var assumeNewDocuments = true
    /// `remoteKey` answers given in this transaction.
    var remoteKeys: [String: Int] = [:]
    /// The registered Mango indexes, read at the transaction's first document write (nil:
    /// not yet, or changed since).
    var mangoIndexes: RegisteredMangoIndexes?
    /// Whether this transaction registered or dropped an index.
    var changedMangoIndexes = false
    /// Whether document writes leave their index entries to the next query (a replicated
    /// batch: `Batch.defersIndexUpdates`).
    var defersMangoEntries = false
    /// Whether this transaction marked the indexes stale already.
    var markedMangoIndexesStale = false
    var deleteEntriesStatement: Statement?
    var insertEntryStatement: Statement?

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

    func dropAcknowledged(_ id: String) throws(StoreError) {
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
        let rows = AcknowledgedRevisions.rowsPerStatement
        var first = 0
        if unchecked && revisions.count >= rows {
            let many = try cached(&recordAcknowledgedManyStatement, AcknowledgedRevisions.recordUncheckedManySQL)
            while revisions.count - first >= rows {
                for k in 0..<rows {
                    let p = Int32(3 * k)
                    many.bind(p + 1, revisions[first + k].documentID)
                    many.bind(p + 2, remote)
                    many.bind(p + 3, revisions[first + k].revisionID)
                }
                try many.run()
                many.reset()
                first += rows
            }
        }
        guard first < revisions.count else { return }
        let s = unchecked ? try conn.prepare(AcknowledgedRevisions.recordUncheckedSQL)
                          : try cached(&recordAcknowledgedStatement, AcknowledgedRevisions.recordSQL)
        for (id, rev) in revisions[first...] {
            s.bind(1, id)
            s.bind(2, remote)
            s.bind(3, rev)
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
        s.bind(1, cur.revisionID)
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
        try updateMangoEntries(id, docKey: key ?? conn.lastInsertRowID, isNew: key == nil, current: cur)
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

}
