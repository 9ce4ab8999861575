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
    @OptionGroup(title: "TLS (serving)") var serverTLS: ServerTLSOptions
    @OptionGroup(title: "TLS (peers given with --replicate)") var clientTLS: ClientTLSOptions

    func validate() throws {
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
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
        let listener = try await SyncListener.start(serving: [dbName: db], configuration: config)
        print("ferry: serving \(database.db) at \(listener.url(for: dbName))/_blipsync\(user == nil ? "" : " (HTTP Basic authentication)")")
        fflush(nil)

        var replicators: [Replicator] = []
        for url in peers {
            var c = ReplicatorConfiguration(database: db, target: url)
            c.continuous = true
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
