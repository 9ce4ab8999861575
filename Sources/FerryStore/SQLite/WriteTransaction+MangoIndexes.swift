/// A Mango index the store keeps entries for (a row of `mango_indexes`).
struct RegisteredMangoIndex {
    var key: Int64
    var columns: [MangoFieldPath]
    var partialFilter: MangoSelector?

    /// The entry key of a document (its `mangoJSON`) in this index; nil when the index does
    /// not hold it (a column missing, the partial filter unmatched).
    func entryKey(_ json: JSONValue, id: String) -> [UInt8]? {
        var key: [UInt8] = []
        for c in columns {
            guard case .found(let v) = c.lookup(in: json) else { return nil }
            CollationKey.append(v, to: &key)
        }
        if let partialFilter, !partialFilter.matches(json) { return nil }
        key += id.utf8
        return key
    }
}

/// The registered indexes, with what of a body they read.
struct RegisteredMangoIndexes {
    var indexes: [RegisteredMangoIndex]
    /// The top-level members their columns start with (UTF-8); nil when a partial filter
    /// needs the whole body.
    var members: [[UInt8]]?
    var readsID = false
    var readsRevision = false

    init(_ indexes: [RegisteredMangoIndex]) {
        self.indexes = indexes
        let first = Set(indexes.flatMap { $0.columns.compactMap(\.segments.first) })
        readsID = first.contains("_id")
        readsRevision = first.contains("_rev")
        if indexes.contains(where: { $0.partialFilter != nil }) {
            members = nil
        } else {
            members = first.subtracting(["_id", "_rev"]).map { Array($0.utf8) }
        }
    }

    /// A stored body as the indexes see it (`Database.mangoJSON`), built from the members
    /// they read only.
    func json(id: String, revision: RevisionID, body: [UInt8]) throws(StoreError) -> JSONValue {
        guard let members else {
            return Database.mangoJSON(id: id, revision: revision, properties: try WriteTransaction.properties(of: body, documentID: id),
                                      deleted: false)
        }
        var props: [String: JSONValue]
        do { props = try JSONParser.parseMembers(body, named: members) } catch { throw .corruptRevisionTree(documentID: id) }
        // `_id` and `_rev` are not in the body: added only when a column reads them.
        if readsID { props["_id"] = .string(id) }
        if readsRevision { props["_rev"] = .string(revision.description) }
        return .object(props)
    }
}

/// Keeping Mango indexes (schema migration 4 → 5): each write of a document replaces its
/// entries in every registered index, in the write's transaction; a write of a design
/// document drops the indexes it no longer defines; `registerMangoIndex` builds one.
extension WriteTransaction {
    /// The registered indexes, read once per transaction.
    func registeredMangoIndexes() throws(StoreError) -> RegisteredMangoIndexes {
        if let mangoIndexes { return mangoIndexes }
        let s = try conn.prepare("SELECT index_key, definition FROM mango_indexes")
        defer { s.reset() }
        var out: [RegisteredMangoIndex] = []
        while try s.step() {
            out.append(try Self.registered(key: s.int64(0), definition: s.bytes(1)))
        }
        let registered = RegisteredMangoIndexes(out)
        mangoIndexes = registered
        return registered
    }

    /// An index from its stored definition (`MangoIndex.storedDefinition`).
    static func registered(key: Int64, definition: [UInt8]) throws(StoreError) -> RegisteredMangoIndex {
        let unreadable = StoreError.corrupt(path: "mango_indexes", detail: "index \(key) has an unreadable definition")
        guard case .object(let def)? = try? JSONParser.parse(definition, maxDepth: 64), case .array(let fields)? = def["fields"],
              let columns = try? fields.map({ (f) throws(MangoError) in try MangoFieldPath(f.stringValue ?? "") }) else { throw unreadable }
        var partialFilter: MangoSelector?
        if let p = def["partial_filter_selector"], p != .object([:]) {
            guard let selector = try? MangoSelector(json: p) else { throw unreadable }
            partialFilter = selector
        }
        return RegisteredMangoIndex(key: key, columns: columns, partialFilter: partialFilter)
    }

    /// After `store` wrote document `id` (row `docKey`) with `current` as its winner. In a
    /// batch that defers its index upkeep (`defersMangoEntries`), the indexes are marked stale
    /// from this write on instead, for `catchUpMangoIndexes`.
    func updateMangoEntries(_ id: String, docKey: Int64, isNew: Bool, current: RevisionTree.Node) throws(StoreError) {
        if Document.isDesignID(id) {
            try dropIndexesNoLongerDefined(by: id, current: current)
            return
        }
        let registered = try registeredMangoIndexes()
        guard !registered.indexes.isEmpty else { return }
        if defersMangoEntries {
            if !markedMangoIndexesStale {
                let s = try conn.prepare("UPDATE mango_indexes SET stale_from = ? WHERE stale_from IS NULL")
                s.bind(1, lastSequence)
                try s.run()
                markedMangoIndexesStale = true
            }
            return
        }
        try replaceMangoEntries(id, docKey: docKey, isNew: isNew, revision: current.revisionID,
                                body: current.isDeleted ? nil : current.body ?? Self.emptyObject, registered)
    }

    /// Replaces document `id`'s entries with those of its winner (`body`; nil: deleted).
    private func replaceMangoEntries(_ id: String, docKey: Int64, isNew: Bool, revision: RevisionID, body: [UInt8]?,
                                     _ registered: RegisteredMangoIndexes) throws(StoreError) {
        if !isNew {
            let d = try cached(&deleteEntriesStatement, "DELETE FROM mango_entries WHERE doc_key = ?")
            d.bind(1, docKey)
            try d.run()
        }
        guard let body else { return }
        let json = try registered.json(id: id, revision: revision, body: body)
        for index in registered.indexes {
            guard let entry = index.entryKey(json, id: id) else { continue }
            try insertEntry(index.key, entry, docKey)
        }
    }

    /// The first sequence whose documents' entries a deferring batch left to a query; nil
    /// when every index is up to date.
    private func staleFrom() throws(StoreError) -> Int64? {
        let s = try conn.prepare("SELECT stale_from FROM mango_indexes WHERE stale_from IS NOT NULL ORDER BY stale_from LIMIT 1")
        defer { s.reset() }
        return try s.step() ? s.int64(0) : nil
    }

    /// Brings the stale indexes up to date: the entries of every document written since the
    /// first deferred write are replaced (a query's first step, as CouchDB updates a view).
    func catchUpMangoIndexes() throws(StoreError) {
        guard let from = try staleFrom() else { return }
        let registered = try registeredMangoIndexes()
        let docs = try conn.prepare("SELECT doc_key, doc_id, rev_id, deleted, body FROM docs WHERE sequence >= ?")
        defer { docs.reset() }
        docs.bind(1, from)
        while try docs.step() {
            let id = docs.string(1)
            if Document.isDesignID(id) { continue }
            guard let rev = try? RevisionID(docs.string(2)) else { throw .corruptRevisionTree(documentID: id) }
            try replaceMangoEntries(id, docKey: docs.int64(0), isNew: false, revision: rev,
                                    body: docs.int64(3) != 0 ? nil : docs.bytes(4), registered)
        }
        try conn.execute("UPDATE mango_indexes SET stale_from = NULL")
    }

    private func insertEntry(_ index: Int64, _ entry: [UInt8], _ docKey: Int64) throws(StoreError) {
        let s = try cached(&insertEntryStatement, "INSERT INTO mango_entries (index_key, key, doc_key) VALUES (?, ?, ?)")
        s.bind(1, index)
        s.bindBlob(2, entry)
        s.bind(3, docKey)
        try s.run()
    }

    /// Drops (with their entries) the registered indexes of design document `ddoc` that its
    /// winning revision `current` no longer defines.
    private func dropIndexesNoLongerDefined(by ddoc: String, current: RevisionTree.Node) throws(StoreError) {
        var kept: Set<String> = []
        if !current.isDeleted {
            let props = try Self.properties(of: current.body ?? Self.emptyObject, documentID: ddoc)
            for index in MangoIndex.indexes(inDesignDocument: ddoc, props) {
                kept.insert(index.name + "\u{0}" + index.storedDefinition)
            }
        }
        let s = try conn.prepare("SELECT index_key, name, definition FROM mango_indexes WHERE ddoc = ?")
        s.bind(1, ddoc)
        var dropped: [Int64] = []
        while try s.step() {
            if !kept.contains(s.string(1) + "\u{0}" + s.string(2)) { dropped.append(s.int64(0)) }
        }
        s.reset()
        for key in dropped {
            for sql in ["DELETE FROM mango_entries WHERE index_key = ?", "DELETE FROM mango_indexes WHERE index_key = ?"] {
                let d = try conn.prepare(sql)
                d.bind(1, key)
                try d.run()
            }
        }
        if !dropped.isEmpty {
            mangoIndexes = nil
            changedMangoIndexes = true
        }
    }

    /// Registers `index` and builds its entries from every live document, unless design
    /// document `index.designDocument`'s winner no longer defines it (a write raced the
    /// query): nil then. Returns the index's key (an already registered one's too).
    func registerMangoIndex(_ index: MangoIndex) throws(StoreError) -> Int64? {
        guard let ddoc = index.designDocument else { return nil }
        let definition = index.storedDefinition
        let find = try conn.prepare("SELECT index_key FROM mango_indexes WHERE ddoc = ? AND name = ? AND definition = ?")
        find.bind(1, ddoc)
        find.bind(2, index.name)
        find.bind(3, definition)
        let existing = try find.step() ? find.int64(0) : nil
        find.reset()
        if let existing { return existing }

        let body = try conn.prepare("SELECT body FROM docs WHERE doc_id = ? AND deleted = 0")
        body.bind(1, ddoc)
        guard try body.step() else { body.reset(); return nil }
        let props = try Self.properties(of: body.bytes(0), documentID: ddoc)
        body.reset()
        guard MangoIndex.indexes(inDesignDocument: ddoc, props).contains(where: {
            $0.name == index.name && $0.storedDefinition == definition
        }) else { return nil }

        let add = try conn.prepare("INSERT INTO mango_indexes (ddoc, name, definition) VALUES (?, ?, ?)")
        add.bind(1, ddoc)
        add.bind(2, index.name)
        add.bind(3, definition)
        try add.run()
        let key = conn.lastInsertRowID
        let registered = try Self.registered(key: key, definition: Array(definition.utf8))
        let reader = RegisteredMangoIndexes([registered])
        let docs = try conn.prepare("SELECT doc_key, doc_id, rev_id, body FROM docs WHERE deleted = 0")
        defer { docs.reset() }
        while try docs.step() {
            let id = docs.string(1)
            if Document.isDesignID(id) { continue }
            guard let rev = try? RevisionID(docs.string(2)) else { throw .corruptRevisionTree(documentID: id) }
            let json = try reader.json(id: id, revision: rev, body: docs.bytes(3))
            if let entry = registered.entryKey(json, id: id) { try insertEntry(key, entry, docs.int64(0)) }
        }
        mangoIndexes = nil
        changedMangoIndexes = true
        return key
    }
}
