import ArgumentParser
import Dispatch
import FerryNet
import FerryServer
import FerryStore
import FerrySync
import FoundationEssentials
import Glibc
import Logging
import ServiceLifecycle
import Synchronization

/// `ferry serve`: serves one database file (`--db`) or every database of a data directory
/// (`--data`) for replication (BLIP) and the REST API on one port, optionally replicating
/// continuously with other peers (a mesh).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve databases at ws://HOST:PORT/NAME/_blipsync and the REST API at http://HOST:PORT/ (wss:// and https:// with --tls-cert).",
        discussion: """
        The default command: `ferry` alone serves ./ferry.db as `ferry` on
        127.0.0.1:4984. SIGINT or SIGTERM stops it cleanly. Settings can also
        come from --config FILE (keys: docs/daemon.md).

        Example:
          ferry serve --allow-anonymous
          ferry serve --db naomi.db --host 0.0.0.0 --user naomi --password "$PW"
          ferry serve --data ./dbs --users ./dbs/_users.json
          ferry serve --db a.db --allow-anonymous \\
              --replicate ws://127.0.0.1:4985/b
          ferry serve --tls-cert cert.pem --tls-key key.pem --allow-anonymous
          ferry serve --discover lab --group-secret "$SECRET" --allow-anonymous
        """)

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
        "Also push and pull continuously with this peer (ws://[user:password@]host:port/db for BLIP, http(s):// for a CouchDB; with --data: NAME=URL for database NAME); repeatable. Retries while it is down.",
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
    @Option(help: ArgumentHelp(
        "Seconds a session cookie (POST /_session, CouchDB's AuthSession) stays valid; renewed on use once a tenth of it has passed.",
        valueName: "seconds"))
    var sessionTimeout = 600
    @Option(help: ArgumentHelp(
        "The session cookie's SameSite attribute: lax (default; another site's pages cannot use it), strict, none (HTTPS only, for pages on other sites with CORS credentials) or unset (CouchDB's default).",
        valueName: "lax|strict|none|unset"))
    var cookieSameSite = "lax"
    @Option(help: ArgumentHelp(
        "Added to the nice value of each database's writer thread (0-19): reads, a replication's change feed among them, then win the CPU over writes when every core is busy.",
        valueName: "n"))
    var writerNice = 0
    @OptionGroup(title: "TLS (serving)") var serverTLS: ServerTLSOptions
    @OptionGroup(title: "TLS (peers given with --replicate, --peer or found with --discover)") var clientTLS: ClientTLSOptions
    @OptionGroup(title: "Discovery and static peers") var discovery: DiscoveryOptions
    @OptionGroup(title: "Limits (docs/daemon.md, \"Limits\")") var limitOptions: LimitOptions
    @OptionGroup(title: "CORS: web pages on other origins (CouchDB's [cors]; off by default)") var corsOptions: CORSOptions

    @Option(help: ArgumentHelp("Read settings from this JSON file (keys: docs/daemon.md); flags given here override it.",
                               valueName: "file"))
    var config: String?
    @Option(help: ArgumentHelp("Log lines as text or as JSON objects (one per line), on standard error.", valueName: "format"))
    var logFormat = "text"
    @Option(help: ArgumentHelp("The least severe level logged: trace, debug, info, notice, warning, error or critical.", valueName: "level"))
    var logLevel = "info"
    @Option(help: ArgumentHelp(
        "What a database created by this server (a new --db file, or PUT /NAME with --data) does with conflicts: resolve (settle them by adding revisions, the default) or keep (keep every leaf, as CouchDB). PUT /NAME?conflict_policy= overrides it per database.",
        valueName: "policy"))
    var conflictPolicy = "resolve"

    /// Raises the soft limit on open files to the hard one: a service manager's default soft
    /// limit (1024 under systemd) is far below the connections a daemon is meant to hold, and
    /// at it every new connection fails to be accepted.
    static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    func validate() throws {
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
        if config == nil { try settings(file: nil).validate() }
    }

    /// The defaults, then the config file, then the flags: without a config file every flag
    /// (given or default) applies; with one, only the flags given on the command line.
    private func settings(file: ServeSettings?) -> ServeSettings {
        var s = file ?? ServeSettings()
        let all = file == nil
        func take(_ flag: String) -> Bool { all || ServeSettings.given(flag) }
        if take("--host") { s.host = host }
        if take("--port") { s.port = port }
        if take("--db") { s.db = database.db }
        if let data { s.data = data }
        if let name { s.name = name }
        if let users { s.users = users }
        if allowAnonymous { s.allowAnonymous = true }
        if take("--anonymous-role") { s.anonymousRole = anonymousRole }
        if !peers.isEmpty { s.replicate = peers }
        if take("--heartbeat") { s.heartbeat = heartbeat }
        if take("--retry-max-wait") { s.retryMaxWait = retryMaxWait }
        if take("--session-timeout") { s.sessionTimeout = sessionTimeout }
        if take("--cookie-same-site") { s.cookieSameSite = cookieSameSite }
        if take("--writer-nice") { s.writerNice = writerNice }
        if let c = serverTLS.tlsCert { s.tlsCert = c }
        if let k = serverTLS.tlsKey { s.tlsKey = k }
        if let ca = serverTLS.clientCa { s.clientCA = ca }
        if take("--log-format") { s.logFormat = logFormat }
        if take("--log-level") { s.logLevel = logLevel }
        if take("--conflict-policy") { s.conflictPolicy = conflictPolicy }
        limitOptions.override(&s.limits)
        corsOptions.override(&s.cors)
        return s
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        Self.raiseOpenFileLimit()
        var fromFile: ServeSettings?
        if let config {
            var f = ServeSettings()
            try f.apply(file: config)
            fromFile = f
        }
        let settings = settings(file: fromFile)
        try settings.validate()
        let level = Logger.Level(rawValue: settings.logLevel) ?? .info
        let json = settings.logFormat == "json"
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, level: level) }
            return TextLogHandler(label: label, level: level)
        }
        let logger = Logger(label: "ferry.serve")

        let location: DatabaseRegistry.Location
        if let data = settings.data {
            // Made before the users file (and the session secret beside it) is opened in it;
            // FerryDaemon.start makes it too, for embedders that do not come through here.
            try DatabaseRegistry.createDataDirectory(data)
            location = .directory(data)
        } else {
            location = .single(name: settings.name ?? URL(fileURLWithPath: settings.db).deletingPathExtension().lastPathComponent,
                               path: settings.db)
        }
        var policy = AccessControl.Policy()
        policy.allowAnonymous = settings.allowAnonymous
        policy.anonymousRole = Role(name: settings.anonymousRole) ?? .writer
        policy.sessionTimeout = settings.sessionTimeout
        policy.cookieSameSite = SessionCookie.SameSite(rawValue: settings.cookieSameSite) ?? .lax
        var config = FerryDaemon.Configuration(location: location)
        settings.limits.apply(to: &config, policy: &policy)
        let access: AccessControl
        if let user, let password {
            access = AccessControl(users: [UserRecord(name: user, password: try PasswordHash(password: password, iterations: 10_000),
                                                      roles: ["*": .admin])], policy: policy)
        } else if let file = settings.users ?? settings.data.map({ UserStore(dataDirectory: $0).path }) {
            access = try AccessControl(store: UserStore(path: file), policy: policy)
        } else {
            access = AccessControl(users: [], policy: policy)
        }
        config.host = settings.host
        config.port = settings.port
        config.tls = settings.tls
        config.heartbeat = settings.heartbeat
        config.databaseOptions.watchExternalWrites = true
        config.databaseOptions.writerNiceness = Int32(settings.writerNice)
        config.databaseOptions.initialConflictPolicy = ConflictPolicy(rawValue: settings.conflictPolicy) ?? .resolve
        config.version = Ferry.version
        config.retryMaxWait = settings.retryMaxWait
        config.replicationTLS = clientTLS.configuration
        config.peers = try discovery.configuration(pins: clientTLS.configuration.pins)
        config.cors = settings.cors.policy
        let daemon = try await FerryDaemon.start(config, access: access, logger: Logger(label: "ferry.daemon"))
        warnAboutAccess(access, settings)
        let names = daemon.registry.names
        // The "serving" lines are printed once the service group runs (DaemonService), that
        // is once SIGTERM is handled: a supervisor that signals as soon as it reads them must
        // not kill the process the default way.
        var ready: [String] = []
        switch location {
        case .single(let name, let path):
            ready.append("ferry: serving \(path) at \(daemon.replicationURL(for: name))/_blipsync and \(daemon.baseURL)/\(name)\(user == nil ? "" : " (HTTP Basic authentication)")")
        case .directory(let dir):
            ready.append("ferry: serving \(names.count) database\(names.count == 1 ? "" : "s") from \(dir) at \(daemon.baseURL)/ (replication: \(daemon.replicationURL(for: "NAME"))/_blipsync)")
        }
        if let peers = daemon.peers, let name = await peers.advertisedName() {
            ready.append("ferry: advertising \"\(name)\" as \(PeerRecord.serviceType) on the LAN\(discovery.discover.map { "; discovering group \($0)" } ?? "")")
        }

        // --replicate peers are managed replications that live as long as this process
        // (transient: not written to the replications file).
        for spec in settings.replicate {
            let dbName: String
            let url: String
            if settings.data != nil, let (n, u) = Self.splitNamed(spec) { (dbName, url) = (n, u) } else { (dbName, url) = (names.first ?? "", spec) }
            guard daemon.registry.database(dbName) != nil else {
                warn("ferry: --replicate \(Sync.redacted(spec)): no database \(dbName) is served; skipped")
                continue
            }
            let id = ReplicationSpec.defaultID(database: dbName, peer: url, prefix: "replicate", includingPath: true)
            do {
                var s = ReplicationSpec(id: id, database: dbName, peer: url)
                s.continuous = true
                try await daemon.scheduler.put(try s.validated(), revision: nil, transient: true)
            } catch {
                warn("ferry: --replicate \(Sync.redacted(spec)): \(error)")
            }
        }
        // SIGUSR1 and SIGUSR2 switch periodic replications to their active and background
        // periods (seed 003's foreground and background), as `ferry policy mode` does.
        let modeSignals = ModeSignals(scheduler: daemon.scheduler)

        // On SIGTERM or SIGINT the daemon stops its replications first (each saves its
        // checkpoint), then closes its clients (1001) and databases.
        let services: [any Service] = [DaemonService(daemon: daemon, ready: ready)]
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // Past this, whatever has not stopped is cancelled, so the process exits well within
        // the 10 s an orchestrator gives before SIGKILL.
        group.maximumGracefulShutdownDuration = .seconds(8)
        try await ServiceGroup(configuration: group).run()
        modeSignals.cancel()
        print("ferry: stopped")
    }

    /// Says, on standard error, when access is wide open or closed to everyone.
    private func warnAboutAccess(_ access: AccessControl, _ settings: ServeSettings) {
        let (host, allowAnonymous, anonymousRole) = (settings.host, settings.allowAnonymous, settings.anonymousRole)
        let loopback = host == "127.0.0.1" || host == "::1" || host == "localhost"
        if !access.hasUsers && !allowAnonymous {
            warn("ferry: no users and anonymous access is off: every request will be refused (401). Add one with `ferry user add`, or pass --allow-anonymous.")
        }
        if allowAnonymous && !loopback && settings.tls == nil {
            warn("ferry: WARNING: listening on \(host) without TLS and with anonymous access (\(anonymousRole)): anyone who can reach this address can \(anonymousRole == "reader" ? "read" : "read and write") every database. Add users (`ferry user add`) and drop --allow-anonymous, or use --tls-cert.")
        } else if !loopback && settings.tls == nil {
            warn("ferry: WARNING: listening on \(host) without TLS: passwords and documents cross the network in clear text. Use --tls-cert/--tls-key.")
        }
    }

    /// `NAME=URL` split at the first `=` (a URL's own `=` come after it).
    static func splitNamed(_ s: String) -> (String, String)? {
        guard let eq = s.firstIndex(of: "="), !s.hasPrefix("ws"), !s.hasPrefix("http"), eq != s.startIndex else { return nil }
        return (String(s[..<eq]), String(s[s.index(after: eq)...]))
    }
}

/// The daemon as a service of the `ServiceGroup`: it is already serving when the group starts
/// (so a bad port fails before anything runs); on graceful shutdown it stops.
struct DaemonService: Service {
    let daemon: FerryDaemon
    /// Lines printed (and flushed) when the group starts this service.
    var ready: [String] = []

    func run() async throws {
        for line in ready { print(line) }
        fflush(nil)
        // Cancellation (a second signal, or the shutdown deadline) ends the wait too.
        try? await gracefulShutdown()
        await daemon.stop()
    }
}

/// Switches the scheduler's mode on SIGUSR1 (active) and SIGUSR2 (background).
final class ModeSignals {
    private let sources: [any DispatchSourceSignal]

    init(scheduler: ReplicationScheduler) {
        var sources: [any DispatchSourceSignal] = []
        for (sig, mode) in [(SIGUSR1, ReplicationScheduler.Mode.active), (SIGUSR2, .background)] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { scheduler.setMode(mode) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() { for s in sources { s.cancel() } }
}
