import ArgumentParser
import FerryNet
import FerryStore
import FerrySync
import Foundation
import Synchronization

/// `ferry serve`: serves a database for push and pull, optionally replicating continuously
/// with other peers (a mesh).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve a database at ws://HOST:PORT/NAME/_blipsync (wss:// with --tls-cert) for peers to push to and pull from.")

    @OptionGroup var database: DatabaseOption
    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 = any free port).") var port = 4984
    @Option(help: "Database name in the URL (default: the file's base name).") var name: String?
    @Option(help: "Require HTTP Basic authentication with this user name.") var user: String?
    @Option(help: "The password for --user.") var password: String?
    @Option(name: .customLong("replicate"), help: ArgumentHelp(
        "Also push and pull continuously with this peer (ws://[user:password@]host:port/db); repeatable. Retries while it is down.",
        valueName: "url"))
    var peers: [String] = []
    @Option(help: ArgumentHelp(
        "Seconds between pings on idle connections, both served and --replicate ones; a peer silent for as long again is dropped (and retried). 0 = off.",
        valueName: "seconds"))
    var heartbeat: Double = 30
    @Option(help: ArgumentHelp(
        "The longest wait between attempts to reach a --replicate peer (the wait doubles from 1 s up to this).",
        valueName: "seconds"))
    var retryMaxWait: Double = 5
    @OptionGroup(title: "TLS (serving)") var serverTLS: ServerTLSOptions
    @OptionGroup(title: "TLS (peers given with --replicate)") var clientTLS: ClientTLSOptions

    func validate() throws {
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
        if heartbeat < 0 { throw ValidationError("--heartbeat must be 0 (off) or positive") }
        if retryMaxWait < 1 { throw ValidationError("--retry-max-wait must be at least 1 second") }
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let db = try database.open(watchExternalWrites: true)
        let dbName = name ?? URL(fileURLWithPath: database.db).deletingPathExtension().lastPathComponent
        var config = SyncListener.Configuration()
        config.host = host
        config.port = port
        if let user, let password { config.credentials = (user, password) }
        config.tls = serverTLS.configuration
        config.heartbeat = heartbeat
        let listener = try await SyncListener.start(serving: [dbName: db], configuration: config)
        print("ferry: serving \(database.db) at \(listener.url(for: dbName))/_blipsync\(user == nil ? "" : " (HTTP Basic authentication)")")
        fflush(nil)

        var supervisors: [Task<Void, Never>] = []
        for url in peers {
            var c = ReplicatorConfiguration(database: db, target: url)
            c.continuous = true
            c.heartbeat = heartbeat
            c.maxAttemptWaitTime = retryMaxWait
            c.tls = clientTLS.configuration
            if let (plain, auth) = Sync.splitCredentials(url) {
                c.target = plain
                c.authenticator = auth
            }
            supervisors.append(Task { [c] in await Self.keepReplicating(c, name: Sync.redacted(url)) })
        }
        await waitForTerminationSignal()
        for s in supervisors { s.cancel() }
        for s in supervisors { await s.value }
        await listener.stop()
        db.close()
        print("ferry: stopped")
    }

    /// How long a `--replicate` replication that stopped on an error waits before starting
    /// again: a daemon keeps its links (the operator may fix a password or the peer a bug), but
    /// does not hammer a peer that keeps refusing.
    static let restartDelay = Duration.seconds(30)

    /// Runs a continuous replication until cancelled: says when the peer becomes unreachable
    /// and reachable again (once each, not at every retry), and starts it again after
    /// `restartDelay` if it stops on an error that retrying does not cure (401, a protocol error).
    static func keepReplicating(_ configuration: ReplicatorConfiguration, name: String) async {
        while !Task.isCancelled {
            let r = Replicator(configuration: configuration)
            let offline = Mutex(false)
            r.addStatusListener { s in
                switch s.activity {
                case .offline:
                    let first = offline.withLock { o in defer { o = true }; return !o }
                    if first { warn("ferry: \(name) unreachable (\(s.lastError.map { "\($0)" } ?? "?")); retrying") }
                case .busy, .idle:
                    if offline.withLock({ o in defer { o = false }; return o }) { warn("ferry: \(name) reachable again") }
                default:
                    break
                }
            }
            r.start()
            let error = await withTaskCancellationHandler {
                await r.waitUntilStopped()
            } onCancel: {
                Task { await r.stop() }
            }
            if Task.isCancelled { await r.stop(); return }
            warn("ferry: replication with \(name) stopped: \(error.map { "\($0)" } ?? "no error"); starting again in \(restartDelay)")
            try? await Task.sleep(for: restartDelay)
        }
    }
}
