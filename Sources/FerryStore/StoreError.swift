/// Every way a store operation can fail, one case per cause, so callers can switch on it.
///
/// The store promises that an operation that throws has written nothing: each public mutation
/// runs in one SQLite transaction that is rolled back on any error.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file exists but is not an SQLite database, or is an SQLite database that Ferry did
    /// not create (unknown `application_id` with tables in it). The file is left untouched.
    case notADatabase(path: String)
    /// SQLite reports the file as corrupt (for example truncated). The file is left untouched.
    case corrupt(path: String, detail: String)
    /// The file was written by a newer Ferry whose schema this build does not know. Untouched.
    case newerSchema(version: Int)
    /// A save or insert conflicts with the current revision (stale parent, `.failOnConflict`,
    /// a conflict handler that declined, or a replicated revision refused in no-conflict mode).
    case conflict(documentID: String)
    /// A validation function refused the revision; `status` is 403 unless it asked for another.
    case rejected(status: Int, message: String)
    /// Bytes that are not well-formed JSON; `reason` says what and where.
    case invalidJSON(reason: String)
    /// A document body that is valid JSON but not a JSON object.
    case notAnObject
    /// A top-level property the store reserves (`_id`, `_rev`, `_revisions`, other `_` names).
    case reservedProperty(String)
    /// A document ID that is empty, too long, or starts with `_`.
    case invalidDocumentID(String)
    /// A revision ID that is not `<generation>-<lowercase even-length hex>`.
    case invalidRevisionID(String)
    /// A replicated history whose generations do not decrease by exactly one per step, or that
    /// does not fit the revision it comes with.
    case brokenHistory(reason: String)
    /// An `_attachments` entry that cannot be stored: bad shape, a digest that is not
    /// `sha1-<base64>`, a negative length, a length that differs from the stored blob's, inline
    /// data. `name` is the attachment's (empty when `_attachments` itself is not an object).
    case invalidAttachment(name: String, reason: String)
    /// Input over a configured size limit (bytes).
    case tooLarge(limit: Int)
    /// No such document, revision, local document or blob.
    case notFound
    /// A query or option that cannot be honoured (bad field path, bad limit, ...).
    case invalidArgument(String)
    /// The database was closed.
    case closed
    /// The stored revision tree of a document could not be decoded.
    case corruptRevisionTree(documentID: String)
    /// Any other SQLite failure, with its result code and message.
    case sqlite(code: Int32, message: String)
    /// A file-system failure (blob files, copying a prebuilt database).
    case io(operation: String, errno: Int32)

    /// Whether the error is the store's, not the one document's: the database or the machine
    /// failed (SQLite, I/O, a corrupt or foreign file, a closed database). In a batch of
    /// inserts such an error fails the whole transaction, where a document's own error (a
    /// conflict, a rejection, bad JSON) fails only that document.
    public var isFatal: Bool {
        switch self {
        case .sqlite, .corrupt, .notADatabase, .closed, .io: return true
        default: return false
        }
    }

    /// Whether the same operation may succeed later: the machine failed, not the data — the
    /// disk is full, an I/O error, the file is locked or memory ran out. A replicator retries
    /// these (and does not checkpoint past what they refused); everything else is permanent.
    public var isTransient: Bool {
        switch self {
        case .sqlite(let code, _):
            // Primary result codes: BUSY, LOCKED, NOMEM, IOERR, FULL, CANTOPEN.
            return [5, 6, 7, 10, 13, 14].contains(code & 0xFF)
        case .io(_, let errno):
            // ENOSPC, EDQUOT, EIO, ENOMEM, EMFILE, ENFILE, EAGAIN.
            return [28, 122, 5, 12, 24, 23, 11].contains(errno)
        default:
            return false
        }
    }

    public var description: String {
        switch self {
        case .notADatabase(let path): return "not a Ferry database: \(path)"
        case .corrupt(let path, let detail): return "database is corrupt: \(path): \(detail)"
        case .newerSchema(let v): return "database schema version \(v) is newer than this build supports"
        case .conflict(let id): return "conflict on document \(id)"
        case .rejected(let status, let message): return "rejected (\(status)): \(message)"
        case .invalidJSON(let reason): return "invalid JSON: \(reason)"
        case .notAnObject: return "document body is not a JSON object"
        case .reservedProperty(let k): return "reserved property \(k)"
        case .invalidDocumentID(let id): return "invalid document ID \(id.debugDescription)"
        case .invalidRevisionID(let r): return "invalid revision ID \(r.debugDescription)"
        case .brokenHistory(let reason): return "broken revision history: \(reason)"
        case .invalidAttachment(let name, let reason): return "invalid attachment \(name.debugDescription): \(reason)"
        case .tooLarge(let limit): return "over the size limit of \(limit) bytes"
        case .notFound: return "not found"
        case .invalidArgument(let s): return "invalid argument: \(s)"
        case .closed: return "database is closed"
        case .corruptRevisionTree(let id): return "stored revision tree of \(id) is corrupt"
        case .sqlite(let code, let message): return "SQLite error \(code): \(message)"
        case .io(let op, let e): return "\(op) failed: errno \(e)"
        }
    }
}
