import CSQLite
import Glibc

/// SQLite wants to copy bound text/blobs it does not own; this is `SQLITE_TRANSIENT`, which the
/// C macro spells as a cast Swift cannot import.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared SQLite statement, owned by one `Connection` and reused through its cache.
///
/// Not thread-safe on its own: it is only touched by the thread that holds its connection.
final class Statement {
    let handle: OpaquePointer
    unowned let connection: Connection

    init(handle: OpaquePointer, connection: Connection) {
        self.handle = handle
        self.connection = connection
    }

    func finalize() { sqlite3_finalize(handle) }

    /// Clears bindings and resets so the statement can run again (done before each use).
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
    func bind(_ index: Int32, _ value: Int) { sqlite3_bind_int64(handle, index, Int64(value)) }
    func bind(_ index: Int32, _ value: Bool) { sqlite3_bind_int(handle, index, value ? 1 : 0) }
    func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(handle, index, value) }
    func bindNull(_ index: Int32) { sqlite3_bind_null(handle, index) }
    func bind(_ index: Int32, _ value: String) {
        var v = value
        v.withUTF8 { bindTextBytes(index, $0) }
    }
    /// Binds a revision ID's text (written on the stack, not made into a string first).
    func bind(_ index: Int32, _ revision: RevisionID) {
        revision.withText { bindTextBytes(index, $0) }
    }
    /// Binds bytes as TEXT (JSON bodies are stored as text so SQLite's JSON functions read them).
    func bindText(_ index: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { bindTextBytes(index, $0) }
    }
    private func bindTextBytes(_ index: Int32, _ buf: UnsafeBufferPointer<UInt8>) {
        buf.withMemoryRebound(to: CChar.self) { c in
            if let base = c.baseAddress {
                _ = sqlite3_bind_text(handle, index, base, Int32(c.count), sqliteTransient)
            } else {
                _ = sqlite3_bind_text(handle, index, "", 0, sqliteTransient)
            }
        }
    }
    func bindBlob(_ index: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buf in
            // A zero-length blob still needs a non-null pointer or SQLite binds NULL.
            var empty: UInt8 = 0
            if let base = buf.baseAddress {
                _ = sqlite3_bind_blob(handle, index, base, Int32(buf.count), sqliteTransient)
            } else {
                _ = sqlite3_bind_blob(handle, index, &empty, 0, sqliteTransient)
            }
        }
    }
    func bind(_ index: Int32, _ value: JSONValue) {
        switch value {
        case .null: bindNull(index)
        case .bool(let b): bind(index, b)
        case .int(let i): bind(index, i)
        case .double(let d): bind(index, d)
        case .string(let s): bind(index, s)
        case .array, .object: bindText(index, CanonicalJSON.encode(value))
        }
    }

    /// Steps once: true when a row is available, false when done.
    func step() throws(StoreError) -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw connection.error(rc)
    }

    /// Runs to completion, ignoring rows.
    func run() throws(StoreError) {
        while try step() {}
    }

    func int64(_ col: Int32) -> Int64 { sqlite3_column_int64(handle, col) }
    func int(_ col: Int32) -> Int { Int(sqlite3_column_int64(handle, col)) }
    func isNull(_ col: Int32) -> Bool { sqlite3_column_type(handle, col) == SQLITE_NULL }
    func string(_ col: Int32) -> String {
        guard let p = sqlite3_column_text(handle, col) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, col))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
    /// The column's text read as a revision ID, straight from SQLite's buffer (no string made
    /// first). A stored ID that does not parse means the row of `documentID` is corrupt.
    func revisionID(_ col: Int32, of documentID: String) throws(StoreError) -> RevisionID {
        let p = sqlite3_column_text(handle, col)
        let n = Int(sqlite3_column_bytes(handle, col))
        guard let rev = RevisionID(parsing: UnsafeRawBufferPointer(start: p, count: p == nil ? 0 : n)) else {
            throw .corruptRevisionTree(documentID: documentID)
        }
        return rev
    }
    /// Whether the column's text is `text`, compared where SQLite holds it (no string made).
    func textEquals(_ col: Int32, _ text: String) -> Bool {
        let p = sqlite3_column_text(handle, col)
        let n = Int(sqlite3_column_bytes(handle, col))
        var text = text
        return text.withUTF8 { t in
            guard t.count == n else { return false }
            guard n > 0 else { return true }
            guard let a = t.baseAddress, let p else { return false }
            return memcmp(a, p, n) == 0
        }
    }
    func bytes(_ col: Int32) -> [UInt8] {
        // Ask for the pointer first: sqlite3_column_bytes after a type conversion is exact.
        guard let p = sqlite3_column_blob(handle, col) else { return [] }
        let n = Int(sqlite3_column_bytes(handle, col))
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}
