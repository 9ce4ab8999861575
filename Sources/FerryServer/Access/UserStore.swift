import FerryStore
import FoundationEssentials

/// The users file of a daemon (`DIR/_users.json`, mode 0600): users with password hashes,
/// roles and certificate mappings, replaced whole (`DurableFile`), so a reader (the running
/// daemon) never sees half a file.
public struct UserStore: Sendable {
    /// Why the file cannot be read or written.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file is not a users file.
        case malformed(String)
        /// The file system refused.
        case io(String)

        public var description: String {
            switch self {
            case .malformed(let s): return "malformed users file: \(s)"
            case .io(let s): return s
            }
        }
    }

    /// The file's path.
    public let path: String

    /// The users file at `path` (it need not exist yet).
    public init(path: String) { self.path = path }

    /// The users file of data directory `directory`.
    public init(dataDirectory directory: String) { path = directory + "/_users.json" }

    /// Every user, by name; none when the file does not exist.
    public func load() throws(Failure) -> [String: UserRecord] {
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) { throw .io("cannot read \(path)") }
            return [:]
        }
        let root: JSONValue
        do { root = try JSONParser.parse(Array(data), sizeLimit: 64 << 20) } catch { throw .malformed("\(error)") }
        guard let users = root.objectValue?["users"]?.objectValue else { throw .malformed("no \"users\" object") }
        var out: [String: UserRecord] = [:]
        for (name, u) in users { out[name] = try UserRecord(name: name, json: u) }
        return out
    }

    /// Replaces the file with `users`.
    public func save(_ users: [String: UserRecord]) throws(Failure) {
        let root: JSONValue = .object(["users": .object(users.mapValues(\.json))])
        do { try DurableFile.write(CanonicalJSON.encode(root) + [10], to: path) } catch { throw .io(error.description) }
    }

    /// Loads, applies `change`, saves.
    public func update(_ change: (inout [String: UserRecord]) throws(Failure) -> Void) throws(Failure) {
        var users = try load()
        try change(&users)
        try save(users)
    }
}
