/// The operations available inside `Database.inBatch`: they all commit together. Only valid
/// inside the closure it is passed to (it is bound to the open transaction).
public final class Batch {
    let txn: WriteTransaction

    init(_ txn: WriteTransaction) { self.txn = txn }

    /// Whether this batch's writes leave their Mango index entries to the next query that
    /// reads the index (which brings it up to date first, as CouchDB updates a view when it
    /// is read) instead of keeping them itself. For bulk transfers — a replicator's batches —
    /// where index upkeep would slow every batch and most written documents are not queried
    /// before the next ones arrive. Off by default: a batch keeps the indexes itself.
    public var defersIndexUpdates: Bool {
        get { txn.defersMangoEntries }
        set { txn.defersMangoEntries = newValue }
    }

    /// See `Database.save(_:concurrencyControl:)`.
    @discardableResult
    public func save(_ document: Document, concurrencyControl: ConcurrencyControl = .lastWriteWins) throws(StoreError) -> Document {
        try txn.save(document, deleting: false, control: .concurrency(concurrencyControl))
    }

    /// See `Database.save(_:conflictHandler:)`.
    @discardableResult
    public func save(_ document: Document, conflictHandler: @escaping ConflictHandler) throws(StoreError) -> Document {
        try txn.save(document, deleting: false, control: .handler(conflictHandler))
    }

    /// See `Database.delete(_:concurrencyControl:)`.
    @discardableResult
    public func delete(_ document: Document, concurrencyControl: ConcurrencyControl = .lastWriteWins) throws(StoreError) -> Document {
        try txn.save(document, deleting: true, control: .concurrency(concurrencyControl))
    }

    /// See `Database.delete(_:conflictHandler:)`.
    @discardableResult
    public func delete(_ document: Document, conflictHandler: @escaping ConflictHandler) throws(StoreError) -> Document {
        try txn.save(document, deleting: true, control: .handler(conflictHandler))
    }

    /// See `Database.purge(_:)`.
    public func purge(_ documentID: String) throws(StoreError) {
        try txn.purge(documentID)
    }

    /// See `Database.insert(_:fromRemote:resolver:allowConflicts:)`.
    @discardableResult
    public func insert(_ revision: ReplicatedRevision, fromRemote remote: String? = nil,
                       resolver: ConflictResolver?, allowConflicts: Bool = true) throws(StoreError) -> InsertOutcome {
        let key = try remote.map { (r) throws(StoreError) -> Int in try txn.remoteKey(r) }
        return try txn.insert(revision, remote: key, resolver: resolver, allowConflicts: allowConflicts)
    }

    /// See `Database.insert(_:fromRemote:allowConflicts:)`: resolves as the database's
    /// conflict policy says.
    @discardableResult
    public func insert(_ revision: ReplicatedRevision, fromRemote remote: String? = nil,
                       allowConflicts: Bool = true) throws(StoreError) -> InsertOutcome {
        try insert(revision, fromRemote: remote, resolver: txn.context.conflictPolicy.automaticResolver, allowConflicts: allowConflicts)
    }

    /// See `Database.putLocalDocument(_:properties:expectedRevision:)`.
    @discardableResult
    public func putLocalDocument(_ id: String, properties: [String: JSONValue], expectedRevision: String? = nil) throws(StoreError) -> String {
        try txn.putLocal(id, properties: properties, expectedRevision: expectedRevision)
    }

    /// See `Database.deleteLocalDocument(_:)`.
    public func deleteLocalDocument(_ id: String) throws(StoreError) {
        try txn.deleteLocal(id)
    }
}
