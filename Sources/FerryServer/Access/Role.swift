/// What a user may do with a database (Protocol/rest.md, "Access control"), each role
/// including the ones below it — CouchDB's `_security` members and admins, with Couchbase
/// Lite's read-only listener as `reader`.
public enum Role: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Pull over BLIP; `GET` and `HEAD` over REST (documents, `_changes`, `_all_docs`, ...),
    /// and keep its own checkpoints: `_local` documents (BLIP's `setCheckpoint`, REST's `PUT`).
    case reader = 1
    /// And push, write documents and attachments, purge.
    case writer = 2
    /// And compact, delete the database. An admin of `*` also creates and deletes databases
    /// and reads the server's metrics.
    case admin = 3

    /// Parses `reader`, `writer` or `admin`.
    public init?(name: String) {
        switch name {
        case "reader": self = .reader
        case "writer": self = .writer
        case "admin": self = .admin
        default: return nil
        }
    }

    /// The role's name.
    public var description: String {
        switch self {
        case .reader: return "reader"
        case .writer: return "writer"
        case .admin: return "admin"
        }
    }

    public static func < (a: Role, b: Role) -> Bool { a.rawValue < b.rawValue }
}
