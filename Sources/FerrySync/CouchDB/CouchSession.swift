import FerryHTTP
import FerryStore
import Logging

/// One session of a replication with a CouchDB database (Protocol/replication-http.md): the
/// database checked (it exists, our credentials are good), then pull and push side by side,
/// each a CouchDB replication of its own with its own checkpoint (CouchDB's replicator is
/// one-directional too). A one-shot push-and-pull pushes once more at the end: conflicts the
/// pull resolved made local revisions, which go back so CouchDB sees the same winner.
struct CouchSession: Sendable {
    let remote: CouchRemote
    let configuration: ReplicatorConfiguration
    let reporter: Reporter
    let logger: Logger
    private let pullCheckpoint: CouchCheckpoint
    private let pushCheckpoint: CouchCheckpoint

    init(configuration c: ReplicatorConfiguration, client: HTTPClient, reporter: Reporter, logger: Logger) throws(ReplicationError) {
        let remote = try CouchRemote(url: c.target, client: client, authenticator: c.authenticator, headers: c.headers)
        self.remote = remote
        configuration = c
        self.reporter = reporter
        self.logger = logger
        // What makes a replication another one: the local database, the remote database, the
        // direction and what is filtered (CouchDB's replication ID has the same ingredients).
        var filters = "\n" + (c.documentIDs ?? []).sorted().joined(separator: ",")
        if let s = c.selector { filters += "\nselector " + String(decoding: CanonicalJSON.encode(s), as: UTF8.self) }
        if let f = c.pullFilter {
            filters += "\nfilter \(f) " + c.pullFilterParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        }
        let base = "ferry-couchdb-1\n\(c.database.uuid.uuidString)\n\(remote.url)"
        pullCheckpoint = CouchCheckpoint(key: base + "\npull" + filters, source: .remote(remote), target: .local(c.database))
        pushCheckpoint = CouchCheckpoint(key: base + "\npush" + filters + "\n" + String(decoding: CanonicalJSON.encode(.object(c.pushFilterParameters)), as: UTF8.self),
                                         source: .local(c.database), target: .remote(remote))
    }

    /// Checks that the database answers: 404 (no such database), 401/403 (credentials) and
    /// the like are permanent errors; the network is retried by the replicator.
    func connect() async throws(ReplicationError) {
        let a = try await remote.request("GET", "")
        guard a.status == 200 else { throw CouchRemote.failure(a, "GET \(remote.url)") }
    }

    /// Pull and push until done (one-shot) or cancelled (continuous).
    func run(reset: Bool) async throws(ReplicationError) {
        let c = configuration
        let puller = c.type == .push ? nil
            : CouchPuller(remote: remote, database: c.database, configuration: c, checkpoint: pullCheckpoint, reporter: reporter, logger: logger)
        let pusher = c.type == .pull ? nil
            : CouchPusher(remote: remote, database: c.database, configuration: c, checkpoint: pushCheckpoint, reporter: reporter, logger: logger)
        let outcome: ReplicationError? = await withTaskGroup(of: ReplicationError?.self) { group in
            if let puller {
                group.addTask {
                    do throws(ReplicationError) { try await puller.run(reset: reset) } catch { return error }
                    return nil
                }
            }
            if let pusher {
                group.addTask {
                    do throws(ReplicationError) { try await pusher.run(reset: reset) } catch { return error }
                    return nil
                }
            }
            for await e in group where e != nil {
                group.cancelAll()
                return e
            }
            return nil
        }
        if let outcome { throw outcome }
        if Task.isCancelled { throw .stopped }
        if let pusher, puller != nil, !c.continuous {
            try await pusher.run(reset: false)
        }
    }
}
