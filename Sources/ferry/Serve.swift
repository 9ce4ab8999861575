import ArgumentParser
import FerryNet
import FerryStore
import FerrySync
import Foundation

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

        var replicators: [Replicator] = []
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
            let r = Replicator(configuration: c)
            r.addStatusListener { s in
                if s.activity == .offline, let e = s.lastError { warn("ferry: \(url) unreachable (\(e)); retrying") }
            }
            r.start()
            replicators.append(r)
        }
        await waitForTerminationSignal()
        for r in replicators { await r.stop() }
        await listener.stop()
        db.close()
        print("ferry: stopped")
    }
}
