import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// One Ferry document database: a single SQLite file in WAL mode with one serial writer and a
/// pool of readers that never block it.
///
/// Promises: every mutation is one transaction, committed or not at all (a throwing call wrote
/// nothing); sequences strictly increase and are never reused; the current revision and the
/// conflict set of a document depend only on its revision tree (docs/store.md). Thread-safe:
/// share one instance; writes are serialised, reads run concurrently.
public final class Database: Sendable {
    /// The database file's path.
    public let path: String
    /// This database's own UUID (a copy made from a prebuilt file gets a new one).
    public let uuid: UUID
    /// The options it was opened with.
    public let options: DatabaseOptions

    let writer: Writer
    let readers: ReaderPool
    let watcher: ExternalWriteWatcher?
    /// The attachment blobs, in a folder beside the file (docs/store.md §10).
    let blobs: BlobStore
    let validators = Mutex<[String: Validator]>([:])
    let policy: Mutex<ConflictPolicy>
    /// `security`, once read from the file.
    let securityCache = Mutex<(loaded: Bool, value: JSONValue?)>((false, nil))
    let logger = Logger(label: "ferry.store")

    private init(path: String, uuid: UUID, options: DatabaseOptions, writer: Writer, conflictPolicy: ConflictPolicy) {
        self.path = path
        self.policy = Mutex(conflictPolicy)
        self.uuid = uuid
        self.options = options
        self.writer = writer
        self.readers = ReaderPool(path: path, writer: writer)
        watcher = options.watchExternalWrites ? ExternalWriteWatcher(path: path, writer: writer) : nil
        self.blobs = BlobStore(databasePath: path)
    }

    /// Opens the database at `path`, creating it if needed — first copying
    /// `options.prebuiltDatabase` there (with its attachment blobs) if that is set and `path`
    /// does not exist yet.
    ///
    /// Throws `.notADatabase`, `.corrupt` or `.newerSchema` for a file it must not use; such a
    /// file is left exactly as it was. An older schema is migrated in one transaction.
    public static func open(at path: String, options: DatabaseOptions = DatabaseOptions()) throws(StoreError) -> Database {
        let fm = FileManager.default
        var copied = false
        if !fm.fileExists(atPath: path), let prebuilt = options.prebuiltDatabase {
            guard fm.fileExists(atPath: prebuilt) else { throw .notFound }
            // Its blobs first (then a database at `path` always has them), the same way.
            let blobFolder = path + BlobStore.folderSuffix
            if fm.fileExists(atPath: prebuilt + BlobStore.folderSuffix) && !fm.fileExists(atPath: blobFolder) {
                try copyIntoPlace(prebuilt + BlobStore.folderSuffix, to: blobFolder)
            }
            // Copy next to the target, then rename: a crash never leaves a half-copied file
            // at `path`.
            try copyIntoPlace(prebuilt, to: path)
            copied = true
        }
        let conn = try Connection(path: path)
        let opened: Schema.Opened
        do {
            opened = try Schema.prepare(conn, options: options, freshUUID: copied)
        } catch {
            conn.close()
            if copied { try? fm.removeItem(atPath: path) }
            throw error
        }
        let db = Database(path: path, uuid: opened.uuid, options: options,
                          writer: Writer(connection: conn, lastSequence: opened.lastSequence,
                                         checkpointer: WALCheckpointer(path: path, thresholdPages: options.walAutoCheckpointPages,
                                                                       synchronous: options.durability == .full ? "FULL" : "NORMAL"),
                                         niceness: options.writerNiceness),
                          conflictPolicy: opened.conflictPolicy)
        db.logger.debug("opened \(path) uuid=\(opened.uuid) lastSequence=\(opened.lastSequence)")
        return db
    }

    /// Copies `source` (a file or folder) to a temporary name beside `target`, then renames it
    /// there, so `target` is either absent or complete.
    static func copyIntoPlace(_ source: String, to target: String) throws(StoreError) {
        let fm = FileManager.default
        let temp = target + ".copy-\(UUID().uuidString)"
        do {
            try fm.copyItem(atPath: source, toPath: temp)
        } catch {
            try? fm.removeItem(atPath: temp)
            // FileManager's errors are CocoaErrors; the system's reason is the POSIX error under them.
            let posix = (error as? POSIXError) ?? ((error as? CocoaError)?.underlying as? POSIXError)
            throw .io(operation: "copy \(source)", errno: posix?.code.rawValue ?? EIO)
        }
        guard rename(temp, target) == 0 else {
            let e = errno
            try? fm.removeItem(atPath: temp)
            throw .io(operation: "rename to \(target)", errno: e)
        }
    }

    /// Closes the database: the WAL is checkpointed into the file, live change feeds end, and
    /// every later call throws `.closed`. Safe to call twice.
    public func close() {
        watcher?.stop()
        blobs.close()
        readers.close()
        writer.close()
    }

    deinit { close() }

    var context: StoreContext {
        let v = validators.withLock { $0.sorted { $0.key < $1.key }.map { (name: $0.key, validate: $0.value) } }
        let path = options.typeKey.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        return StoreContext(databaseID: uuid, options: options, blobs: blobs, typePath: path,
                            typeKeyBytes: path.count == 1 ? Array(options.typeKey.utf8) : [], validators: v,
                            conflictPolicy: conflictPolicy)
    }

    /// What this database does with conflicts (`ConflictPolicy`; `.resolve` unless set). Kept
    /// in the file: every process that opens it agrees.
    public var conflictPolicy: ConflictPolicy { policy.withLock { $0 } }

    /// Sets and records the conflict policy. Conflicts already stored stay as they are: under
    /// `.resolve` they are settled by `resolveConflicts(of:using:)` or the next replication.
    public func setConflictPolicy(_ newPolicy: ConflictPolicy) throws(StoreError) {
        try inBatch { (b) throws(StoreError) in
            let s = try b.txn.conn.prepare(Schema.setConflictPolicySQL)
            s.bind(1, newPolicy.rawValue)
            try s.run()
        }
        writer.whenCommitted { self.policy.withLock { $0 = newPolicy } }
    }

    /// Runs `body` in one write transaction: everything it does commits together or not at all.
    /// Use it to save or insert many documents with one commit.
    public func inBatch<T: Sendable>(_ body: (Batch) throws(StoreError) -> T) throws(StoreError) -> T {
        try writer.transaction(context) { (txn) throws(StoreError) -> T in try body(Batch(txn)) }
    }

    /// Runs `body` on this database's writer thread and returns its result: how async code calls
    /// the synchronous write API (`save`, `insert`, `inBatch`, `putLocalDocument`, …) without
    /// blocking a thread of Swift's cooperative pool on the write lock, a commit or an fsync.
    /// Each call inside `body` is atomic on its own, as it would be anywhere; for several
    /// changes that must commit together, call `inBatch` inside it. Writes that queue up while
    /// the thread is busy share one commit (each still failing alone), so many concurrent small
    /// writes cost few commits; `write` returns once what `body` wrote has committed. While
    /// `body` runs it holds this database's writer, so it should not wait for anything that
    /// needs it (another database's `write` that in turn writes here). Reads need no such hop:
    /// they run on the reader pool's connections and never wait for the writer.
    ///
    /// ```swift
    /// let saved = try await db.write { (d) throws(StoreError) in try d.save(document) }
    /// ```
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws(StoreError) -> T) async throws(StoreError) -> T {
        try await writer.perform { () throws(StoreError) -> T in try body(self) }
    }

    // MARK: - Saving

    /// Saves a document (a new one, or one read earlier and changed) as a child of the current
    /// revision. If it changed since it was read: `.lastWriteWins` overwrites the other change
    /// (unless that change was a deletion: then `.conflict`), `.failOnConflict` throws
    /// `.conflict`. Returns the saved document with its new revision ID and sequence.
    @discardableResult
    public func save(_ document: Document, concurrencyControl: ConcurrencyControl = .lastWriteWins) throws(StoreError) -> Document {
        try inBatch { (b) throws(StoreError) -> Document in try b.save(document, concurrencyControl: concurrencyControl) }.from(uuid)
    }

    /// Saves a document; if it changed since it was read, `conflictHandler` gets it and the
    /// current document and may merge; returning false throws `.conflict`.
    @discardableResult
    public func save(_ document: Document, conflictHandler: @escaping ConflictHandler) throws(StoreError) -> Document {
        try inBatch { (b) throws(StoreError) -> Document in try b.save(document, conflictHandler: conflictHandler) }.from(uuid)
    }

    /// Deletes a document: adds a tombstone (`{}`) as a child of the current revision. To keep
    /// fields on the tombstone (for filtered replication), save the document with
    /// `"_deleted": true` among its properties instead. Throws `.notFound` if it never existed.
    @discardableResult
    public func delete(_ document: Document, concurrencyControl: ConcurrencyControl = .lastWriteWins) throws(StoreError) -> Document {
        try inBatch { (b) throws(StoreError) -> Document in try b.delete(document, concurrencyControl: concurrencyControl) }.from(uuid)
    }

    /// Deletes a document with a conflict handler (see `save(_:conflictHandler:)`).
    @discardableResult
    public func delete(_ document: Document, conflictHandler: @escaping ConflictHandler) throws(StoreError) -> Document {
        try inBatch { (b) throws(StoreError) -> Document in try b.delete(document, conflictHandler: conflictHandler) }.from(uuid)
    }

    /// Removes a document and its whole revision tree, as if it had never existed (no tombstone,
    /// no change-feed entry). Throws `.notFound` if there is no such document.
    public func purge(_ documentID: String) throws(StoreError) {
        try inBatch { (b) throws(StoreError) in try b.purge(documentID) }
    }

    // MARK: - Replicated revisions

    /// Inserts a revision received from a peer with its history (Protocol/revisions.md,
    /// "Revision tree"). A revision already present is a `noop`. If it conflicts with the
    /// current revision and `resolver` is given, the conflict is resolved in the same
    /// transaction; with nil it stays in the tree, and a custom resolver that declines (throws,
    /// or answers with another database's document) keeps the revision and the conflict
    /// (`InsertOutcome.resolved` false, a warning in the log). `remote` names the
    /// peer: its latest revision is kept. With `allowConflicts: false` (a passive peer,
    /// Protocol/revisions.md, "Convergence rules") a revision that would fork the document is
    /// refused with `.conflict` and nothing is written.
    @discardableResult
    public func insert(_ revision: ReplicatedRevision, fromRemote remote: String? = nil,
                       resolver: ConflictResolver?, allowConflicts: Bool = true) throws(StoreError) -> InsertOutcome {
        try inBatch { (b) throws(StoreError) -> InsertOutcome in
            try b.insert(revision, fromRemote: remote, resolver: resolver, allowConflicts: allowConflicts)
        }
    }

    /// Inserts a replicated revision, resolving a conflict as the database's `conflictPolicy`
    /// says (`ConflictPolicy.automaticResolver`).
    @discardableResult
    public func insert(_ revision: ReplicatedRevision, fromRemote remote: String? = nil,
                       allowConflicts: Bool = true) throws(StoreError) -> InsertOutcome {
        try inBatch { (b) throws(StoreError) -> InsertOutcome in
            try b.insert(revision, fromRemote: remote, allowConflicts: allowConflicts)
        }
    }

    /// Inserts many replicated revisions in one transaction (one commit). Each gets its own
    /// result: a refused one (bad input, validation, broken history) writes nothing and does
    /// not stop the others; an SQLite failure rolls the whole batch back and throws.
    public func insert(_ revisions: [ReplicatedRevision], fromRemote remote: String? = nil,
                       resolver: ConflictResolver?,
                       allowConflicts: Bool = true) throws(StoreError) -> [Result<InsertOutcome, StoreError>] {
        try insertEach(revisions) { (b, r) throws(StoreError) in
            try b.insert(r, fromRemote: remote, resolver: resolver, allowConflicts: allowConflicts)
        }
    }

    /// Inserts many replicated revisions in one transaction, resolving conflicts as the
    /// database's `conflictPolicy` says; see `insert(_:fromRemote:resolver:allowConflicts:)`.
    public func insert(_ revisions: [ReplicatedRevision], fromRemote remote: String? = nil,
                       allowConflicts: Bool = true) throws(StoreError) -> [Result<InsertOutcome, StoreError>] {
        try insertEach(revisions) { (b, r) throws(StoreError) in
            try b.insert(r, fromRemote: remote, allowConflicts: allowConflicts)
        }
    }

    private func insertEach(_ revisions: [ReplicatedRevision],
                            _ insert: (Batch, ReplicatedRevision) throws(StoreError) -> InsertOutcome)
        throws(StoreError) -> [Result<InsertOutcome, StoreError>] {
        try inBatch { (b) throws(StoreError) -> [Result<InsertOutcome, StoreError>] in
            var out: [Result<InsertOutcome, StoreError>] = []
            out.reserveCapacity(revisions.count)
            for r in revisions {
                do throws(StoreError) {
                    out.append(.success(try insert(b, r)))
                } catch {
                    if error.isFatal { throw error }
                    out.append(.failure(error))
                }
            }
            return out
        }
    }

    /// Resolves every conflict of a document (the current revision against each other live
    /// leaf, highest first) and returns the document afterwards. Two stores holding the same
    /// tree produce the same revisions. A custom resolver that declines (throws, or answers
    /// with another database's document) fails the call with `.rejected` (409): nothing is
    /// written and the conflicts stay.
    @discardableResult
    public func resolveConflicts(of documentID: String, using resolver: ConflictResolver = .default) throws(StoreError) -> Document? {
        _ = try inBatch { (b) throws(StoreError) -> Int in try b.txn.resolveAll(documentID, resolver: resolver) }
        return try document(documentID, includeDeleted: true)
    }

    /// Resolves one conflict between two named leaves by adding revisions (docs/store.md §4;
    /// Protocol/revisions.md, "Storing a resolution"): the kept leaf stays, a merged body or a
    /// deletion continues the higher leaf, the loser is closed. Returns the revision created
    /// for a new body, if any. A custom resolver that declines (throws, or answers with another
    /// database's document) fails the call with `.rejected` (409) and nothing is written.
    @discardableResult
    public func resolveConflict(documentID: String, local: RevisionID, remote: RevisionID,
                                using resolver: ConflictResolver = .default) throws(StoreError) -> RevisionID? {
        try inBatch { (b) throws(StoreError) -> RevisionID? in
            try b.txn.resolveOne(documentID, local: local, remote: remote, resolver: resolver)
        }
    }

    // MARK: - Validation

    /// Registers (or with nil removes) a validation function under `name`. Validators run in
    /// name order on every local save and every replicated revision before it is stored.
    public func setValidation(named name: String, _ validator: Validator?) {
        validators.withLock { $0[name] = validator }
    }

    // MARK: - Reading

    /// The current revision of a document; nil if it does not exist or (unless
    /// `includeDeleted`) is deleted.
    public func document(_ id: String, includeDeleted: Bool = false) throws(StoreError) -> Document? {
        try readers.withReader { (c) throws(StoreError) -> Document? in
            let s = try c.prepare("SELECT rev_id, deleted, sequence, body FROM docs WHERE doc_id = ?")
            defer { s.reset() }
            s.bind(1, id)
            guard try s.step() else { return nil }
            let deleted = s.int(1) != 0
            if deleted && !includeDeleted { return nil }
            let rev = try s.revisionID(0, of: id)
            let props = try WriteTransaction.properties(of: s.bytes(3), documentID: id)
            return Document(id: id, revisionID: rev, properties: props, isDeleted: deleted, sequence: s.int64(2)).from(uuid)
        }
    }

    /// The current body's JSON bytes as stored, without parsing (the replicator's path).
    public func documentJSON(_ id: String) throws(StoreError) -> (revisionID: String, isDeleted: Bool, body: [UInt8])? {
        try readers.withReader { (c) throws(StoreError) -> (revisionID: String, isDeleted: Bool, body: [UInt8])? in
            let s = try c.prepare("SELECT rev_id, deleted, body FROM docs WHERE doc_id = ?")
            defer { s.reset() }
            s.bind(1, id)
            guard try s.step() else { return nil }
            return (s.string(0), s.int(1) != 0, s.bytes(2))
        }
    }

    /// The revision tree of a document, or nil if there is no such document.
    public func revisionTree(of id: String) throws(StoreError) -> RevisionTree? {
        try readers.withReader { (c) throws(StoreError) -> RevisionTree? in
            let s = try c.prepare("SELECT body, tree FROM docs WHERE doc_id = ?")
            defer { s.reset() }
            s.bind(1, id)
            guard try s.step() else { return nil }
            var tree = try RevisionTreeCodec.decode(s.bytes(1), currentBody: s.bytes(0), documentID: id)
            // Read while `s` is still active, so both reads see the same snapshot.
            _ = try AcknowledgedRevisions.apply(c.prepare(AcknowledgedRevisions.selectSQL), documentID: id, to: &tree)
            return tree
        }
    }

    /// A specific revision of a document, if its body is still kept (leaves and remotes' latest).
    public func revision(_ rev: RevisionID, of id: String) throws(StoreError) -> Document? {
        guard let tree = try revisionTree(of: id), let node = tree.nodes[rev], let body = node.body else { return nil }
        let props = try WriteTransaction.properties(of: body, documentID: id)
        return Document(id: id, revisionID: rev, properties: props, isDeleted: node.isDeleted, sequence: 0).from(uuid)
    }

    /// The live leaves other than the current revision (the conflicts), highest first; empty
    /// when the document is not in conflict or does not exist.
    public func conflictingRevisions(of id: String) throws(StoreError) -> [Document] {
        guard let tree = try revisionTree(of: id) else { return [] }
        var out: [Document] = []
        for rev in tree.conflicts {
            guard let node = tree.nodes[rev] else { continue }
            let props = try WriteTransaction.properties(of: node.body ?? WriteTransaction.emptyObject, documentID: id)
            out.append(Document(id: id, revisionID: rev, properties: props, isDeleted: false, sequence: 0).from(uuid))
        }
        return out
    }

    /// IDs of documents with conflicts, sorted.
    public func conflictedDocumentIDs() throws(StoreError) -> [String] {
        try readers.withReader { (c) throws(StoreError) -> [String] in
            // Named index: without statistics SQLite walks the doc_id index to avoid sorting,
            // i.e. reads every row, where the partial index holds only the conflicted ones.
            // Bit 0 of `conflicted`: live conflicts (bit 1: other open leaves, `Change`).
            try c.strings("SELECT doc_id FROM docs INDEXED BY docs_conflicted WHERE conflicted != 0 AND (conflicted & 1) != 0 ORDER BY doc_id")
        }
    }

    /// How many documents exist (not counting deleted ones unless asked).
    public func documentCount(includeDeleted: Bool = false) throws(StoreError) -> Int {
        try readers.withReader { (c) throws(StoreError) -> Int in
            Int(try c.scalarInt(includeDeleted ? "SELECT count(*) FROM docs" : "SELECT count(*) FROM docs WHERE deleted = 0") ?? 0)
        }
    }

    // MARK: - Changes

    /// The last sequence committed.
    public var lastSequence: Int64 { writer.notifier.lastSequence }

    /// Changes after `since`, in sequence order: each document once, at its latest change.
    public func changes(since: Int64 = 0, limit: Int = 1000) throws(StoreError) -> [Change] {
        try changes(where: "sequence > ? ORDER BY sequence", bound: since, limit: limit)
    }

    /// Changes before `before`, newest first (CouchDB's `_changes?descending=true`).
    public func changesDescending(before: Int64 = .max, limit: Int = 1000) throws(StoreError) -> [Change] {
        try changes(where: "sequence < ? ORDER BY sequence DESC", bound: before, limit: limit)
    }

    private func changes(where clause: String, bound: Int64, limit: Int) throws(StoreError) -> [Change] {
        guard limit > 0 else { throw .invalidArgument("limit must be positive") }
        return try readers.withReader { (c) throws(StoreError) -> [Change] in
            let s = try c.prepare("SELECT doc_id, rev_id, deleted, sequence, conflicted FROM docs WHERE \(clause) LIMIT ?")
            defer { s.reset() }
            s.bind(1, bound)
            s.bind(2, limit)
            var out: [Change] = []
            while try s.step() {
                let id = s.string(0)
                let rev = try s.revisionID(1, of: id)
                out.append(Change(documentID: id, revisionID: rev, isDeleted: s.int(2) != 0, sequence: s.int64(3),
                                  hasOtherLeaves: s.int(4) & 2 != 0))
            }
            return out
        }
    }

    /// How many documents last changed before `before` (what a descending feed has left).
    public func pendingChangeCount(before: Int64) throws(StoreError) -> Int {
        try readers.withReader { (c) throws(StoreError) -> Int in
            let s = try c.prepare("SELECT count(*) FROM docs WHERE sequence < ?")
            defer { s.reset() }
            s.bind(1, before)
            return try s.step() ? s.int(0) : 0
        }
    }

    /// How many documents changed after `since` (what a replicator still has to push after
    /// its checkpoint).
    public func pendingChangeCount(since: Int64) throws(StoreError) -> Int {
        try readers.withReader { (c) throws(StoreError) -> Int in
            let s = try c.prepare("SELECT count(*) FROM docs WHERE sequence > ?")
            defer { s.reset() }
            s.bind(1, since)
            return try s.step() ? s.int(0) : 0
        }
    }

    /// A live sequence of changes after `since` that waits for new commits; see `LiveChanges`.
    public func liveChanges(since: Int64 = 0, pageSize: Int = 200) -> LiveChanges {
        LiveChanges(database: self, since: since, pageSize: max(1, pageSize))
    }

    // MARK: - Local documents

    /// A local document, or nil.
    public func localDocument(_ id: String) throws(StoreError) -> LocalDocument? {
        try readers.withReader { (c) throws(StoreError) -> LocalDocument? in
            let s = try c.prepare("SELECT generation, body FROM local_docs WHERE doc_id = ?")
            defer { s.reset() }
            s.bind(1, id)
            guard try s.step() else { return nil }
            let props = try WriteTransaction.properties(of: s.bytes(1), documentID: id)
            return LocalDocument(id: id, revision: "0-\(s.int(0))", properties: props)
        }
    }

    /// Writes a local document. With `expectedRevision`, fails with `.conflict` unless that is
    /// its current revision; without, overwrites. Returns the new revision.
    @discardableResult
    public func putLocalDocument(_ id: String, properties: [String: JSONValue],
                                 expectedRevision: String? = nil) throws(StoreError) -> String {
        try inBatch { (b) throws(StoreError) -> String in
            try b.putLocalDocument(id, properties: properties, expectedRevision: expectedRevision)
        }
    }

    /// Deletes a local document; `.notFound` if absent.
    public func deleteLocalDocument(_ id: String) throws(StoreError) {
        try inBatch { (b) throws(StoreError) in try b.deleteLocalDocument(id) }
    }

    // MARK: - Maintenance

    /// `PRAGMA integrity_check` on a reader: `["ok"]` for a healthy file.
    public func integrityCheck() throws(StoreError) -> [String] {
        try readers.withReader { (c) throws(StoreError) -> [String] in try c.strings("PRAGMA integrity_check") }
    }
}
