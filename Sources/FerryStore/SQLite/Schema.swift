import FoundationEssentials

/// The database schema, its version (`PRAGMA user_version`) and the migrations that bring an
/// older file up to date. Ferry files carry `PRAGMA application_id = 0x46455259` ("FERY").
enum Schema {
    static let applicationID: Int64 = 0x4645_5259
    static let currentVersion = 6

    /// Migration `i` takes a file from version `i` to `i + 1`. Append, never edit.
    static let migrations: [String] = [
        // 0 → 1: documents with their revision trees, local documents, remotes.
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
        CREATE TABLE docs (
            doc_key    INTEGER PRIMARY KEY,
            doc_id     TEXT NOT NULL UNIQUE,
            rev_id     TEXT NOT NULL,
            deleted    INTEGER NOT NULL,
            conflicted INTEGER NOT NULL,
            sequence   INTEGER NOT NULL,
            body       TEXT NOT NULL,
            tree       BLOB NOT NULL
        );
        CREATE UNIQUE INDEX docs_by_sequence ON docs(sequence);
        CREATE INDEX docs_conflicted ON docs(conflicted) WHERE conflicted != 0;
        CREATE TABLE local_docs (doc_id TEXT PRIMARY KEY, generation INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE remotes (remote_key INTEGER PRIMARY KEY, address TEXT NOT NULL UNIQUE);
        INSERT INTO meta (key, value) VALUES ('last_sequence', 0);
        """,
        // 1 → 2: the current revision's type as a column, filled by the store (the scanner
        // captures it while validating), so the type index costs no JSON parse per write. Its
        // content depends on `options.typeKey`, recorded in `meta.type_key`; `prepare` fills the
        // column whenever that differs from the key a database is opened with.
        """
        ALTER TABLE docs ADD COLUMN doc_type TEXT;
        CREATE INDEX docs_by_type ON docs(doc_type) WHERE doc_type IS NOT NULL;
        INSERT OR REPLACE INTO meta (key, value) VALUES ('type_key', NULL);
        """,
        // 2 → 3: revisions peers acknowledged, kept beside the document rows until the next
        // write of the document moves them into its tree (`AcknowledgedRevisions`).
        """
        CREATE TABLE remote_revs (
            doc_id     TEXT NOT NULL,
            remote_key INTEGER NOT NULL,
            rev_id     TEXT NOT NULL,
            PRIMARY KEY (doc_id, remote_key)
        ) WITHOUT ROWID;
        """,
        // 3 → 4: every deletion of a document row counts in `meta.purges`, whoever runs it (a
        // trigger, so another process's purge counts too); a pusher compares the count to skip
        // re-checking that the documents it acknowledges still exist. Builds older than this
        // refuse the file (newer schema), so none can purge without counting.
        """
        CREATE TRIGGER docs_purged AFTER DELETE ON docs BEGIN
            INSERT INTO meta (key, value) VALUES ('purges', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1;
        END;
        """,
        // 4 → 5: Mango indexes (`MangoIndexStore`). An index is registered, and its entries
        // built, the first time a query uses it; from then on every write of a document keeps
        // its entries in the same transaction. `definition` is the index's canonical form, so
        // a design document that redefines a name gets a new index. An entry's key is the
        // document's columns as `CollationKey` bytes, then its ID: BLOB order is the view's.
        """
        CREATE TABLE mango_indexes (
            index_key  INTEGER PRIMARY KEY,
            ddoc       TEXT NOT NULL,
            name       TEXT NOT NULL,
            definition TEXT NOT NULL,
            UNIQUE (ddoc, name, definition)
        );
        CREATE TABLE mango_entries (
            index_key INTEGER NOT NULL,
            key       BLOB NOT NULL,
            doc_key   INTEGER NOT NULL,
            PRIMARY KEY (index_key, key)
        ) WITHOUT ROWID;
        CREATE INDEX mango_entries_by_doc ON mango_entries(doc_key);
        CREATE TRIGGER docs_purged_from_indexes AFTER DELETE ON docs BEGIN
            DELETE FROM mango_entries WHERE doc_key = old.doc_key;
        END;
        """,
        // 5 → 6: a replicated batch leaves the entries of the documents it writes to the
        // next query (`stale_from`: the first sequence whose documents may have stale
        // entries; NULL: none), as CouchDB brings a view up to date when it is read.
        """
        ALTER TABLE mango_indexes ADD COLUMN stale_from INTEGER;
        """,
    ]

    /// `meta.type_key`: the type key `docs.doc_type` was computed with (nil inside: not yet).
    static func typeKey(_ conn: Connection) throws(StoreError) -> String?? {
        let s = try conn.prepare("SELECT value FROM meta WHERE key = 'type_key'")
        defer { s.reset() }
        guard try s.step() else { return .none }
        return .some(s.isNull(0) ? nil : s.string(0))
    }

    struct Opened {
        var uuid: UUID
        var lastSequence: Int64
        var conflictPolicy: ConflictPolicy
    }

    /// `meta.conflict_policy` (absent: `.resolve`, what every database did before policies).
    static func conflictPolicy(_ conn: Connection) throws(StoreError) -> ConflictPolicy {
        let s = try conn.prepare("SELECT value FROM meta WHERE key = 'conflict_policy'")
        defer { s.reset() }
        guard try s.step(), !s.isNull(0) else { return .resolve }
        let text = s.string(0)
        guard let policy = ConflictPolicy(rawValue: text) else {
            throw .corrupt(path: conn.path, detail: "unknown conflict policy \(text)")
        }
        return policy
    }

    static let setConflictPolicySQL = "INSERT OR REPLACE INTO meta (key, value) VALUES ('conflict_policy', ?)"

    /// Checks the file is a Ferry database this build can use, then (only then) switches it to
    /// WAL and runs pending migrations. Throws before writing anything if the file is not a
    /// database, is corrupt, is another application's database, or has a newer schema.
    static func prepare(_ conn: Connection, options: DatabaseOptions, freshUUID: Bool) throws(StoreError) -> Opened {
        // These reads are the first I/O on the file: SQLite reports NOTADB/CORRUPT here.
        let appID = try conn.scalarInt("PRAGMA application_id") ?? 0
        let version = Int(try conn.scalarInt("PRAGMA user_version") ?? 0)
        let objects = try conn.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
        let isFresh = appID == 0 && version == 0 && objects == 0
        if !isFresh {
            guard appID == applicationID else { throw .notADatabase(path: conn.path) }
            guard version <= currentVersion else { throw .newerSchema(version: version) }
            // Touch the tables' pages too, so a truncated file is caught before any write.
            _ = try conn.scalarInt("SELECT count(*) FROM meta")
            _ = try conn.scalarInt("SELECT max(sequence) FROM docs")
        }

        // Only takes effect on an empty file, and only before it leaves rollback-journal mode.
        if isFresh {
            let size = options.pageSize
            guard (512...65_536).contains(size), size & (size - 1) == 0 else {
                throw .invalidArgument("pageSize must be a power of two from 512 to 65536, not \(size)")
            }
            try conn.execute("PRAGMA page_size=\(size)")
        }
        _ = try conn.strings("PRAGMA journal_mode=WAL")
        try conn.execute("PRAGMA synchronous=\(options.durability == .full ? "FULL" : "NORMAL")")
        _ = try conn.strings("PRAGMA wal_autocheckpoint=\(max(1, options.walAutoCheckpointPages))")
        try conn.execute("PRAGMA cache_size=-\(max(256, options.writerCacheKiB))")

        let typePath = try PredicateCompiler.jsonPath(options.typeKey)
        let storedTypeKey: String?? = version >= 2 ? try typeKey(conn) : .some(nil)
        if version < currentVersion || freshUUID || storedTypeKey != .some(options.typeKey) {
            try conn.execute("BEGIN IMMEDIATE")
            do throws(StoreError) {
                for v in version..<currentVersion {
                    try conn.execute(migrations[v])
                    try conn.execute("PRAGMA user_version=\(v + 1)")
                    if v == 1 {
                        // Version 1 indexed the type key with a JSON expression at every open;
                        // the doc_type column replaces it.
                        try conn.execute("DROP INDEX IF EXISTS docs_field_\(Hex.encode(Array(options.typeKey.utf8)))")
                    }
                }
                if try typeKey(conn) != .some(options.typeKey) {
                    // The same value the store computes: the type path's value where it is text.
                    try conn.execute("""
                        UPDATE docs SET doc_type = CASE WHEN json_type(body, '\(typePath)') = 'text'
                                                        THEN json_extract(body, '\(typePath)') END
                        """)
                    let s = try conn.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('type_key', ?)")
                    s.bind(1, options.typeKey)
                    try s.run()
                }
                if isFresh {
                    try conn.execute("PRAGMA application_id=\(applicationID)")
                    let p = try conn.prepare(setConflictPolicySQL)
                    p.bind(1, options.initialConflictPolicy.rawValue)
                    try p.run()
                }
                if isFresh || freshUUID {
                    let s = try conn.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('uuid', ?)")
                    s.bind(1, UUID().uuidString)
                    try s.run()
                }
                try conn.execute("COMMIT")
            } catch {
                try? conn.execute("ROLLBACK")
                throw error
            }
        }

        let s = try conn.prepare("SELECT value FROM meta WHERE key = 'uuid'")
        guard try s.step(), let uuid = UUID(uuidString: s.string(0)) else {
            s.reset()
            throw .corrupt(path: conn.path, detail: "missing database UUID")
        }
        s.reset()
        let last = try conn.scalarInt("SELECT value FROM meta WHERE key = 'last_sequence'") ?? 0
        return Opened(uuid: uuid, lastSequence: last, conflictPolicy: try conflictPolicy(conn))
    }
}
