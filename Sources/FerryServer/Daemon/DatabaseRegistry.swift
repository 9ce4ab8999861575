import FerryStore
import FoundationEssentials
import Synchronization

/// The databases one daemon serves, by name: every `NAME.ferry` file under a data directory
/// (nested names as folders), or one file under one name. Databases are created and deleted
/// while the daemon runs; a deleted database is closed first, so no one writes to a file that
/// is going away.
public final class DatabaseRegistry: Sendable {
    /// Where the databases live.
    public enum Location: Sendable, Equatable {
        /// Every `*.ferry` file under this directory.
        case directory(String)
        /// One file served under one name; no database can be created or deleted.
        case single(name: String, path: String)
    }

    /// The location served.
    public let location: Location
    private let options: DatabaseOptions
    private let open = Mutex<[String: Database]>([:])

    /// Opens every database at `location` (creating the directory, or the one file, if missing).
    public init(location: Location, options: DatabaseOptions = DatabaseOptions()) throws(RESTError) {
        self.location = location
        self.options = options
        switch location {
        case .single(let name, let path):
            let db = try Self.openDatabase(path, options)
            open.withLock { $0[name] = db }
        case .directory(let dir):
            try Self.createDataDirectory(dir)
            var found: [String: Database] = [:]
            for name in Self.scan(dir) {
                found[name] = try Self.openDatabase(dir + "/" + name + ".ferry", options)
            }
            open.withLock { $0 = found }
        }
    }

    /// Creates data directory `dir` (and its missing parents) if it does not exist, readable by
    /// its owner only (0700): it holds the users file's password hashes, the daemon's bearer
    /// token and every database. An existing directory is left as it is.
    public static func createDataDirectory(_ dir: String) throws(RESTError) {
        var isDirectory = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) {
            guard isDirectory else { throw RESTError(500, "internal_server_error", "\(dir) is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw RESTError(500, "internal_server_error", "cannot create \(dir): \(error)")
        }
    }

    /// The database called `name`, if served. In a data directory a `NAME.ferry` file that
    /// appeared since start (`ferry db create` beside a running daemon) is opened now.
    public func database(_ name: String) -> Database? {
        if let db = open.withLock({ $0[name] }) { return db }
        guard case .directory(let dir) = location, let valid = try? DatabaseName(name) else { return nil }
        let path = dir + "/" + valid.relativePath
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return open.withLock { dbs in
            if let db = dbs[name] { return db }
            guard let db = try? Self.openDatabase(path, options) else { return nil }
            dbs[name] = db
            return db
        }
    }

    /// Every name served, sorted.
    public var names: [String] { open.withLock { $0.keys.sorted() } }

    /// Every database served, by name.
    public var all: [String: Database] { open.withLock { $0 } }

    /// Creates database `name`, with `conflictPolicy` if given (else the options'
    /// `initialConflictPolicy`). 400 for a bad name, 412 when it exists, 403 for a one-file daemon.
    public func create(_ name: String, conflictPolicy: ConflictPolicy? = nil) throws(RESTError) -> Database {
        guard case .directory(let dir) = location else {
            throw .forbidden("this peer serves one database file; start it with --data DIR to create databases")
        }
        let valid: DatabaseName
        do { valid = try DatabaseName(name) } catch { throw RESTError(400, "illegal_database_name", error.description) }
        let path = dir + "/" + valid.relativePath
        return try open.withLock { (dbs) throws(RESTError) -> Database in
            if dbs[name] != nil || FileManager.default.fileExists(atPath: path) {
                throw RESTError(412, "file_exists", "The database could not be created, the file already exists.")
            }
            let parent = FileSystem.directory(of: path)
            try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            var creating = options
            if let conflictPolicy { creating.initialConflictPolicy = conflictPolicy }
            let db = try Self.openDatabase(path, creating)
            dbs[name] = db
            return db
        }
    }

    /// Closes and deletes database `name` with its attachments. 404 when it is not served.
    public func delete(_ name: String) throws(RESTError) {
        guard case .directory(let dir) = location else {
            throw .forbidden("this peer serves one database file; it cannot be deleted over the API")
        }
        guard let db = open.withLock({ $0.removeValue(forKey: name) }) else { throw .notFound("Database does not exist.") }
        db.close()
        let path = dir + "/" + name + ".ferry"
        for suffix in ["", "-wal", "-shm", ".attachments"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }

    /// Closes every database.
    public func closeAll() {
        for db in open.withLock({ Array($0.values) }) { db.close() }
    }

    private static func openDatabase(_ path: String, _ options: DatabaseOptions) throws(RESTError) -> Database {
        do { return try Database.open(at: path, options: options) } catch {
            throw RESTError(500, "internal_server_error", "cannot open \(path): \(error)")
        }
    }

    /// Names of the `*.ferry` files under `dir` whose names are valid database names.
    static func scan(_ dir: String) -> [String] {
        guard let paths = try? FileManager.default.subpathsOfDirectory(atPath: dir) else { return [] }
        var names: [String] = []
        for rel in paths {
            guard rel.hasSuffix(".ferry") else { continue }
            let name = String(rel.dropLast(".ferry".count))
            if (try? DatabaseName(name)) != nil { names.append(name) }
        }
        return names
    }
}
