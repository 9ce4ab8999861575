import ArgumentParser
import FerryNet
import FerryServer
import FerryStore
import FerrySync
import Foundation
import Synchronization

/// `ferry serve`: serves one database file (`--db`) or every database of a data directory
/// (`--data`) for replication (BLIP) and the REST API on one port, optionally replicating
/// continuously with other peers (a mesh).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve databases at ws://HOST:PORT/NAME/_blipsync and the REST API at http://HOST:PORT/ (wss:// and https:// with --tls-cert).")

    @OptionGroup var database: DatabaseOption
    @Option(help: ArgumentHelp("Serve every database in this directory (NAME.ferry files; created if missing) instead of one --db file.",
                               valueName: "dir"))
    var data: String?
    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 = any free port).") var port = 4984
    @Option(help: "Database name in the URL for --db (default: the file's base name).") var name: String?
    @Option(help: "Require HTTP Basic authentication with this user name (an admin of every database).") var user: String?
    @Option(help: "The password for --user.") var password: String?
    @Option(help: ArgumentHelp("The users file (default: DIR/_users.json with --data; see `ferry user`).", valueName: "file"))
    var users: String?
    @Flag(help: "Let requests without credentials in (with --anonymous-role). Off by default.") var allowAnonymous = false
    @Option(help: ArgumentHelp("What anonymous requests may do with --allow-anonymous: reader, writer or admin.", valueName: "role"))
    var anonymousRole = "writer"
    @Option(name: .customLong("replicate"), help: ArgumentHelp(
        "Also push and pull continuously with this peer (ws://[user:password@]host:port/db; with --data: NAME=URL for database NAME); repeatable. Retries while it is down.",
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
        if Role(name: anonymousRole) == nil { throw ValidationError("--anonymous-role is reader, writer or admin") }
        if data != nil && name != nil { throw ValidationError("--name names the one --db file; with --data the file names are the database names") }
        if data != nil { for p in peers where Self.splitNamed(p) == nil { throw ValidationError("with --data, --replicate takes NAME=URL") } }
        if heartbeat < 0 { throw ValidationError("--heartbeat must be 0 (off) or positive") }
        if retryMaxWait < 1 { throw ValidationError("--retry-max-wait must be at least 1 second") }
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let location: DatabaseRegistry.Location
        if let data {
            location = .directory(data)
        } else {
            location = .single(name: name ?? URL(fileURLWithPath: database.db).deletingPathExtension().lastPathComponent,
                               path: database.db)
        }
        var policy = AccessControl.Policy()
        policy.allowAnonymous = allowAnonymous
        policy.anonymousRole = Role(name: anonymousRole) ?? .writer
        let access: AccessControl
        if let user, let password {
            access = AccessControl(users: [UserRecord(name: user, password: try PasswordHash(password: password, iterations: 10_000),
                                                      roles: ["*": .admin])], policy: policy)
        } else if let file = users ?? data.map({ UserStore(dataDirectory: $0).path }) {
            access = try AccessControl(store: UserStore(path: file), policy: policy)
        } else {
            access = AccessControl(users: [], policy: policy)
        }
        var config = FerryDaemon.Configuration(location: location)
        config.host = host
        config.port = port
        config.tls = serverTLS.configuration
        config.heartbeat = heartbeat
        config.databaseOptions.watchExternalWrites = true
        config.version = Ferry.version
        let daemon = try await FerryDaemon.start(config, access: access)
        warnAboutAccess(access)
        let names = daemon.registry.names
        switch location {
        case .single(let name, let path):
            print("ferry: serving \(path) at \(daemon.replicationURL(for: name))/_blipsync and \(daemon.baseURL)/\(name)\(user == nil ? "" : " (HTTP Basic authentication)")")
        case .directory(let dir):
            print("ferry: serving \(names.count) database\(names.count == 1 ? "" : "s") from \(dir) at \(daemon.baseURL)/ (replication: \(daemon.replicationURL(for: "NAME"))/_blipsync)")
        }
        fflush(nil)

        var supervisors: [Task<Void, Never>] = []
        for spec in peers {
            let dbName: String
            let url: String
            if data != nil, let (n, u) = Self.splitNamed(spec) { (dbName, url) = (n, u) } else { (dbName, url) = (names.first ?? "", spec) }
            guard let db = daemon.registry.database(dbName) else {
                warn("ferry: --replicate \(Sync.redacted(spec)): no database \(dbName) is served; skipped")
                continue
            }
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
        await daemon.stop()
        print("ferry: stopped")
    }

    /// Says, on standard error, when access is wide open or closed to everyone.
    private func warnAboutAccess(_ access: AccessControl) {
        let loopback = host == "127.0.0.1" || host == "::1" || host == "localhost"
        if !access.hasUsers && !allowAnonymous {
            warn("ferry: no users and anonymous access is off: every request will be refused (401). Add one with `ferry user add`, or pass --allow-anonymous.")
        }
        if allowAnonymous && !loopback && serverTLS.configuration == nil {
            warn("ferry: WARNING: listening on \(host) without TLS and with anonymous access (\(anonymousRole)): anyone who can reach this address can \(anonymousRole == "reader" ? "read" : "read and write") every database. Add users (`ferry user add`) and drop --allow-anonymous, or use --tls-cert.")
        } else if !loopback && serverTLS.configuration == nil {
            warn("ferry: WARNING: listening on \(host) without TLS: passwords and documents cross the network in clear text. Use --tls-cert/--tls-key.")
        }
    }

    /// `NAME=URL` split at the first `=` (a URL's own `=` come after it).
    static func splitNamed(_ s: String) -> (String, String)? {
        guard let eq = s.firstIndex(of: "="), !s.hasPrefix("ws"), eq != s.startIndex else { return nil }
        return (String(s[..<eq]), String(s[s.index(after: eq)...]))
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
