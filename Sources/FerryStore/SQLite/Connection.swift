import CSQLite

/// One SQLite connection with a cache of prepared statements.
///
/// `@unchecked Sendable` is safe because a connection is only ever used by one thread at a
/// time, by construction: the write connection lives inside `Writer`'s mutex and is only
/// touched while that mutex is held; a read connection is removed from `ReaderPool` for the
/// duration of one `withReader` call and put back afterwards. No other code holds a reference.
final class Connection: @unchecked Sendable {
    let handle: OpaquePointer
    let path: String
    private var cache: [String: Statement] = [:]
    private var isClosed = false

    /// Opens (or creates, if `create`) the file. Reads nothing yet: opening never modifies it.
    init(path: String, readOnly: Bool = false, create: Bool = true) throws(StoreError) {
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE)
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.flatMap { sqlite3_errmsg($0).map { String(cString: $0) } } ?? "open failed"
            if let db { sqlite3_close_v2(db) }
            throw Connection.map(rc, message: message, path: path)
        }
        self.handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 0)
        // Another process (or another Database on the same file) may hold the write lock briefly.
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { close() }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        for s in cache.values { s.finalize() }
        cache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// The cached prepared statement for `sql`, reset and with bindings cleared.
    func prepare(_ sql: String) throws(StoreError) -> Statement {
        if let s = cache[sql] {
            s.reset()
            return s
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc) }
        let s = Statement(handle: stmt, connection: self)
        cache[sql] = s
        return s
    }

    /// A statement that is not cached; the caller finalizes it. For EXPLAIN, which never checks
    /// the schema cookie and so would keep a stale plan if cached.
    func prepareUncached(_ sql: String) throws(StoreError) -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc) }
        return Statement(handle: stmt, connection: self)
    }

    /// Runs one or more statements without caching (schema, pragmas, transactions).
    func execute(_ sql: String) throws(StoreError) {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(err)
            throw Connection.map(rc, message: message, path: path)
        }
    }

    /// The first column of the first row of `sql` as an integer (pragmas).
    func scalarInt(_ sql: String) throws(StoreError) -> Int64? {
        let s = try prepare(sql)
        defer { s.reset() }
        return try s.step() ? s.int64(0) : nil
    }

    /// The first column of every row as text (e.g. `PRAGMA integrity_check`).
    func strings(_ sql: String) throws(StoreError) -> [String] {
        let s = try prepare(sql)
        defer { s.reset() }
        var out: [String] = []
        while try s.step() { out.append(s.string(0)) }
        return out
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    func error(_ rc: Int32) -> StoreError {
        Connection.map(rc, message: String(cString: sqlite3_errmsg(handle)), path: path)
    }

    static func map(_ rc: Int32, message: String, path: String) -> StoreError {
        switch rc & 0xff {
        case SQLITE_NOTADB: return .notADatabase(path: path)
        case SQLITE_CORRUPT: return .corrupt(path: path, detail: message)
        case SQLITE_TOOBIG: return .tooLarge(limit: 1_000_000_000)
        default: return .sqlite(code: rc, message: message)
        }
    }
}
