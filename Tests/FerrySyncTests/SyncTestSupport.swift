import FerryNet
import FerryStore
@_exported import FerryTestSupport
@testable import FerrySync
import Foundation
import Testing

/// One device in a test: its own SQLite file, and (when serving) a listener on port 0.
final class Peer: Sendable {
    let name: String
    let dir: TempDir
    let db: Database
    let listener: SyncListener?

    private init(name: String, dir: TempDir, db: Database, listener: SyncListener?) {
        self.name = name
        self.dir = dir
        self.db = db
        self.listener = listener
    }

    static func make(_ name: String, serving: Bool = false, credentials: (String, String)? = nil,
                     tls: TLSServerConfiguration? = nil) async throws -> Peer {
        let dir = TempDir()
        let db = try Database.open(at: dir.path("\(name).ferry"))
        var listener: SyncListener?
        if serving {
            var c = SyncListener.Configuration()
            c.port = 0
            c.credentials = credentials.map { (user: $0.0, password: $0.1) }
            c.tls = tls
            listener = try await SyncListener.start(serving: [name: db], configuration: c)
        }
        return Peer(name: name, dir: dir, db: db, listener: listener)
    }

    /// This peer's replication URL.
    var url: String { listener?.url(for: name) ?? "ws://127.0.0.1:1/\(name)" }

    func stop() async {
        await listener?.stop()
        db.close()
    }

    @discardableResult
    func put(_ id: String, _ props: [String: JSONValue]) throws -> Document {
        var doc = try db.document(id) ?? Document(id: id)
        doc.properties = props
        return try db.save(doc)
    }

    func body(_ id: String) throws -> [String: JSONValue]? { try db.document(id)?.properties }
    func current(_ id: String) throws -> String? { try db.document(id, includeDeleted: true)?.revisionID?.description }
}

/// Runs a one-shot replication from `active` to `passive` and returns the replicator.
@discardableResult
func replicate(_ active: Peer, with passive: Peer, _ type: ReplicatorConfiguration.ReplicatorType = .pushAndPull,
               configure: (inout ReplicatorConfiguration) -> Void = { _ in }) async throws -> Replicator {
    var c = ReplicatorConfiguration(database: active.db, target: passive.url)
    c.type = type
    configure(&c)
    let r = Replicator(configuration: c)
    try await r.run()
    return r
}

/// Collects a replicator's document events until it stops.
final class EventLog: Sendable {
    let task: Task<[DocumentEvent], Never>
    init(_ r: Replicator) {
        let stream = r.documentEvents()
        task = Task { var out: [DocumentEvent] = []; for await e in stream { out.append(e) }; return out }
    }
}
