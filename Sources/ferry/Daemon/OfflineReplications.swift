import ArgumentParser
import FerryServer
import FerryStore
import FoundationEssentials

/// The replications file of data no daemon serves, changed under the daemon's lock (so a
/// daemon starting meanwhile waits for nothing and reads a whole file).
struct OfflineReplications {
    let store: ReplicationStore
    let prefix: String

    init(_ daemon: DaemonOptions) throws {
        if let data = daemon.data {
            store = ReplicationStore(dataDirectory: data)
            prefix = DaemonEndpoint.prefix(for: .directory(data))
        } else if let db = daemon.db {
            store = ReplicationStore(path: db + ".replicator.json")
            prefix = DaemonEndpoint.prefix(for: .single(name: "", path: db))
        } else {
            throw ValidationError("give --data DIR or --db FILE")
        }
    }

    func entries() throws -> [ReplicationStore.Entry] {
        try store.load().values.sorted { $0.spec.id < $1.spec.id }
    }

    func update(_ change: (inout [String: ReplicationStore.Entry]) throws -> Void) throws {
        try FileManager.default.createDirectory(atPath: FileSystem.directory(of: store.path), withIntermediateDirectories: true)
        let lock = try DaemonEndpoint.lock(prefix)
        defer { lock.release() }
        var all = try store.load()
        try change(&all)
        try store.save(all)
    }
}
