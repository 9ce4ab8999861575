import FerryHTTP
import FerryNet
import FerryStore
import FerrySync
import FerryWebSocket
import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// The Ferry peer as a long-lived process (Protocol/rest.md): many databases, served on one
/// port and one event loop group for both replication (`/{db}/_blipsync`, BLIP over
/// WebSocket) and the CouchDB-shaped REST API, with one access-control decision for both.
public final class FerryDaemon: Sendable {
    /// What a daemon serves and how.
    public struct Configuration: Sendable {
        /// Address to bind.
        public var host = "127.0.0.1"
        /// Port (0 = any free port).
        public var port = 4984
        /// Where the databases are.
        public var location: DatabaseRegistry.Location
        /// Serve `wss://` and `https://` with this certificate (client certificates optional).
        public var tls: TLSServerConfiguration?
        /// Seconds between WebSocket pings to idle replication clients (0 = off).
        public var heartbeat: Double = 60
        /// HTTP head and body limits of the REST API.
        public var httpLimits = HTTPLimits()
        /// Seconds an HTTP connection may idle between requests.
        public var idleTimeout: Double = 60
        /// Seconds a request may take to arrive once begun (then 408).
        public var requestTimeout: Double = 30
        /// Seconds a streamed answer (a `_changes` feed) may wait on a client that does not
        /// read before the connection is dropped; the feed never runs further ahead of its
        /// reader than the connection's output buffer.
        public var slowReaderTimeout: Double = 60
        /// Bytes that request bodies being read or answered may hold together (past the first
        /// 64 KiB of each); one address's bodies may hold `httpLimits.maxBodySize`. A body
        /// past either gets 503 and its connection closes.
        public var maxRequestMemory = 128 * 1024 * 1024
        /// Bytes per second of request bodies one client address may send (its connections
        /// are read no faster); 0 = no limit.
        public var maxUploadRate = 16 * 1024 * 1024
        /// Connections beyond this get 503 and close (open ones keep working).
        public var maxConnections = 100_000
        /// Connections from one client address beyond this get 503 and close.
        public var maxConnectionsPerAddress = 1_000
        /// Store options for every database.
        public var databaseOptions = DatabaseOptions()
        /// The version `GET /` reports.
        public var version = "0.1.0"
        /// Where managed replications are kept (`DIR/_replicator.json`, or `FILE.replicator.json`
        /// beside a single database); nil = none survive a restart.
        public var replicationsFile: String?
        /// How managed replications verify their peers' certificates (before their own pins).
        public var replicationTLS = TLSClientConfiguration()
        /// The longest wait between a managed replication's attempts to reach its peer.
        public var retryMaxWait: Double = 30
        /// Take the data's lock and write its endpoint file (`DaemonEndpoint`), so that the
        /// `ferry` command finds this daemon and a second daemon on the same data refuses to start.
        public var publishEndpoint = true
        /// Advertising on the link, discovery of a group's members and static peers
        /// (`PeerCoordinator`); nil = none of them.
        public var peers: PeerCoordinator.Configuration?
        /// Whether every answered request is logged at `info` under `ferry.request` (the
        /// access log, as CouchDB's request log).
        public var accessLog = true
        /// Cross-origin requests from web pages (CouchDB's `[cors]`); nil = none, the default.
        public var cors: CORSPolicy?
        /// Seconds each replication client gets, when the daemon stops, to answer the
        /// WebSocket close before it is dropped. A client that stopped reading would otherwise
        /// hold the stop for the whole `closeTimeout`, its close frame queued behind the
        /// revisions already sent to it; it loses nothing, as it resumes from its checkpoint.
        public var shutdownGracePeriod: Double = 2
        /// A daemon of `location` with the defaults.
        public init(location: DatabaseRegistry.Location) {
            self.location = location
            switch location {
            case .directory(let dir): replicationsFile = ReplicationStore(dataDirectory: dir).path
            case .single(_, let path): replicationsFile = path + ".replicator.json"
            }
        }
    }

    /// The databases served.
    public let registry: DatabaseRegistry
    /// Users and roles.
    public let access: AccessControl
    /// The REST API.
    public let router: RESTRouter
    /// What `/_up` and `/_metrics` report of the replications this daemon runs: the
    /// scheduler's managed ones register here, and so may an embedding app's own.
    public let replications: ReplicationRegistry
    /// The managed replications (`/_replicator`, `/_scheduler/jobs`).
    public let scheduler: ReplicationScheduler
    /// The metrics `/_metrics` renders.
    public let metrics: DaemonMetrics
    /// The open REST connections and their byte counts.
    public let httpConnections: HTTPConnectionTracker
    private let listener: SyncListener
    private let lock: DaemonEndpoint.Lock?
    private let publisher: EndpointPublisher?
    private let coordinator: CoordinatorSlot
    private let shutdownGracePeriod: Double
    private let logger: Logger

    /// The advertiser, browser and static peers, when configured.
    public var peers: PeerCoordinator? { coordinator.value.withLock { $0 } }

    /// Where the coordinator is put once the listener's port is known; the discovery route
    /// reads it from the start.
    final class CoordinatorSlot: Sendable {
        let value = Mutex<PeerCoordinator?>(nil)
    }

    /// The port bound.
    public var port: Int { listener.port }
    /// The host bound.
    public var host: String { listener.host }
    /// Whether it serves TLS.
    public var secure: Bool { listener.secure }
    /// The base URL of the REST API.
    public var baseURL: String { "\(secure ? "https" : "http")://\(host):\(port)" }
    /// The replication URL of database `name` (without `/_blipsync`).
    public func replicationURL(for name: String) -> String { listener.url(for: PercentEncoding.encode(name)) }

    private init(registry: DatabaseRegistry, access: AccessControl, router: RESTRouter, replications: ReplicationRegistry,
                 scheduler: ReplicationScheduler, metrics: DaemonMetrics, httpConnections: HTTPConnectionTracker,
                 listener: SyncListener, lock: DaemonEndpoint.Lock?, publisher: EndpointPublisher?, coordinator: CoordinatorSlot,
                 shutdownGracePeriod: Double, logger: Logger) {
        self.coordinator = coordinator
        self.shutdownGracePeriod = shutdownGracePeriod
        self.logger = logger
        self.scheduler = scheduler
        self.lock = lock
        self.publisher = publisher
        self.registry = registry
        self.access = access
        self.router = router
        self.replications = replications
        self.metrics = metrics
        self.httpConnections = httpConnections
        self.listener = listener
    }

    /// Opens the databases and starts serving. `GET /_up` and `GET /_metrics` are answered
    /// first (docs/daemon.md), then `hooks`, then the REST API.
    public static func start(_ configuration: Configuration, access: AccessControl,
                             hooks: [@Sendable (RESTRequest, RESTRouter) async -> RESTResponse?] = [],
                             group: EventLoopGroup = .shared,
                             logger: Logger = Logger(label: "ferry.daemon")) async throws -> FerryDaemon {
        // The data directory first: its lock file lives in it (docs/daemon.md: created if missing).
        if case .directory(let dir) = configuration.location { try DatabaseRegistry.createDataDirectory(dir) }
        let lock = configuration.publishEndpoint ? try DaemonEndpoint.lock(DaemonEndpoint.prefix(for: configuration.location)) : nil
        let registry: DatabaseRegistry
        do { registry = try DatabaseRegistry(location: configuration.location, options: configuration.databaseOptions) } catch {
            lock?.release()
            throw error
        }
        var schedulerConfiguration = ReplicationScheduler.Configuration(store: configuration.replicationsFile.map(ReplicationStore.init(path:)))
        schedulerConfiguration.heartbeat = configuration.heartbeat > 0 ? configuration.heartbeat : 300
        schedulerConfiguration.retryMaxWait = configuration.retryMaxWait
        schedulerConfiguration.tls = configuration.replicationTLS
        let replications = ReplicationRegistry()
        let scheduler = ReplicationScheduler(configuration: schedulerConfiguration, resolve: { registry.database($0) },
                                             links: replications, logger: Logger(label: "ferry.replications"))
        let box = Mutex<SyncListener?>(nil)
        let metrics = DaemonMetrics()
        let tracker = HTTPConnectionTracker()
        let sources = DaemonMetrics.Sources(registry: registry, replications: replications, http: tracker,
                                            logins: access.throttle, listener: { box.withLock { $0 } })
        let id = try serverID(configuration.location, registry)
        let coordinator = CoordinatorSlot()
        let router = RESTRouter(registry: registry, access: access, serverID: id,
                                version: configuration.version,
                                hooks: [OperationsRoutes.hook(metrics: metrics, sources: sources), ReplicatorRoutes.hook(scheduler, ownURL: {
                                    guard let l = box.withLock({ $0 }), configuration.tls == nil else { return nil }
                                    let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
                                    return "http://\(host.contains(":") ? "[\(host)]" : host):\(l.port)"
                                }),
                                        DiscoveryRoute.hook { coordinator.value.withLock { $0 } }, ConsoleRoutes.hook()] + hooks,
                                cors: configuration.cors, logger: logger)
        var sync = SyncListener.Configuration()
        sync.host = configuration.host
        sync.port = configuration.port
        sync.tls = configuration.tls
        sync.heartbeat = configuration.heartbeat
        sync.maxConnections = configuration.maxConnections
        sync.maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
        sync.authorize = { request, name in
            // The same decision as REST's: a session cookie, Basic (checked on the password
            // pool, off the loop), a client certificate, or anonymous.
            switch await access.authenticate(authorization: request.headers["Authorization"], cookie: request.headers["Cookie"],
                                             certificate: request.peerCertificate, address: request.remoteAddress?.host) {
            case .failure(let e):
                var headers = e.status == 401 ? HTTPHeaders([("WWW-Authenticate", #"Basic realm="Ferry""#)]) : HTTPHeaders()
                if let seconds = e.retryAfter { headers.add(name: "Retry-After", value: String(seconds)) }
                return .refuse(status: e.status, message: e.reason, headers: headers)
            case .success(let authentication):
                let identity = authentication.identity
                switch access.role(of: identity, on: name) {
                case nil: return .refuse(status: 403, message: "\(identity) may not use database \(name)", headers: HTTPHeaders())
                case .reader?: return .readOnly
                case .writer?: return .readWrite
                case .admin?: return .admin
                }
            }
        }
        let limits = configuration.httpLimits
        let uploads = configuration.maxUploadRate > 0 ? UploadRateLimiter(bytesPerSecond: configuration.maxUploadRate) : nil
        let bodies = RequestBodyBudget(total: configuration.maxRequestMemory,
                                       perAddress: min(configuration.maxRequestMemory, max(limits.maxBodySize, 1 << 20)))
        let timeouts = HTTPServerConnection.Timeouts(idle: configuration.idleTimeout, request: configuration.requestTimeout,
                                                     firstRequest: min(WebSocketConfiguration().handshakeTimeout, configuration.requestTimeout),
                                                     slowReader: configuration.slowReaderTimeout)
        let accessLog = configuration.accessLog ? AccessLog() : nil
        access.setSecurityLookup { name in
            // An object that no longer parses (written by another version) grants nothing.
            guard let json = try? registry.database(name)?.security else { return nil }
            return try? SecurityObject(json: json)
        }
        sync.plainHTTP = { handoff in
            let connection = HTTPServerConnection(
                handoff: handoff, limits: limits, timeouts: timeouts, logger: logger, tracker: tracker, bodies: bodies, uploads: uploads,
                accessLog: accessLog, respond: { request in
                    // Counted here, around the whole router, so every route is counted
                    // without the routes knowing.
                    let response = await router.respond(request)
                    metrics.countRequest(request, status: response.status)
                    return response
                },
                upgrader: { handoff, request, rest in
                    if let l = box.withLock({ $0 }) { l.upgrade(handoff, request: request, rest: rest) } else { handoff.tcp.close() }
                })
            connection.start()
        }
        let listener: SyncListener
        do {
            listener = try await SyncListener.start(resolving: { registry.database($0) }, configuration: sync, group: group, logger: logger)
        } catch {
            registry.closeAll()
            lock?.release()
            throw error
        }
        box.withLock { $0 = listener }
        let publisher = lock.map { lock in
            let token = DaemonEndpoint.newToken()
            access.setLocalToken(token)
            let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : listener.host
            let url = "\(listener.secure ? "https" : "http")://\(host.contains(":") ? "[\(host)]" : host):\(listener.port)"
            return EndpointPublisher(DaemonEndpoint(url: url, token: token, pid: getpid()), under: lock, logger: logger)
        }
        let daemon = FerryDaemon(registry: registry, access: access, router: router, replications: replications, scheduler: scheduler,
                                 metrics: metrics, httpConnections: tracker, listener: listener, lock: lock, publisher: publisher,
                                 coordinator: coordinator, shutdownGracePeriod: configuration.shutdownGracePeriod, logger: logger)
        do {
            try scheduler.start()
            if let peers = configuration.peers {
                if let group = peers.group { access.setGroup(group) }
                let pin = try configuration.tls.map { try certificatePin($0.identity.certificateChain) }
                let c = try PeerCoordinator(configuration: peers, scheduler: scheduler, registry: registry, serverID: id,
                                            listenHost: configuration.host, port: listener.port, pin: pin,
                                            clientTLS: configuration.replicationTLS, logger: Logger(label: "ferry.peers"))
                coordinator.value.withLock { $0 = c }
                await c.start()
            }
        } catch {
            await daemon.stop()
            throw error
        }
        return daemon
    }

    /// Registers a named pull filter for both sides of the port: BLIP clients select it with
    /// `filter` in `subChanges`, REST clients with `_changes?filter=NAME` (the other query
    /// parameters are its parameters).
    public func registerPullFilter(_ name: String, _ filter: @escaping PullFilter) {
        listener.registerPullFilter(name, filter)
        router.registerPullFilter(name, filter)
    }

    /// Clients connected over BLIP now.
    public var replicationClientCount: Int { listener.connectionCount }

    /// What the listener's replication clients did since start.
    public var replicationStatistics: SyncListener.Statistics { listener.statistics }

    /// Stops accepting, closes every replication client (WebSocket close 1001, "going away")
    /// and every REST connection, then closes the databases.
    ///
    /// Clients get `Configuration.shutdownGracePeriod` to answer the close. Cancelling the
    /// calling task (a service group's shutdown deadline) drops the clients still open at
    /// once; the databases close either way, so nothing committed is lost.
    public func stop() async {
        let start = ContinuousClock.now
        // The goodbye goes first, so that peers stop replicating with this one before its
        // connections close.
        await peers?.stop()
        await scheduler.stop()
        let replicationsStopped = ContinuousClock.now
        await listener.stop(gracePeriod: shutdownGracePeriod)
        let clientsClosed = ContinuousClock.now
        httpConnections.closeAll()
        registry.closeAll()
        await publisher?.stop()
        lock?.release()
        // Where a slow stop spent its time, for whoever has to explain it.
        let end = ContinuousClock.now
        logger.info("stopped", metadata: [
            "seconds": "\(Self.milliseconds(end - start))",
            "replications": "\(Self.milliseconds(replicationsStopped - start))",
            "clients": "\(Self.milliseconds(clientsClosed - replicationsStopped))",
            "databases": "\(Self.milliseconds(end - clientsClosed))",
        ])
    }

    /// Seconds to the millisecond.
    private static func milliseconds(_ d: Duration) -> Double { (d.seconds * 1000).rounded() / 1000 }

    /// The hex SHA-256 of the leaf certificate (what peers pin).
    static func certificatePin(_ chain: PEMSource) throws -> String {
        let text: String
        switch chain {
        case .file(let path): text = try String(contentsOfFile: path, encoding: .utf8)
        case .pem(let pem): text = pem
        }
        return Hex.encode(try TLSCertificate(pem: text).sha256)
    }

    /// The server's stable ID: kept in `DIR/_server_id` (made on first start), or the one
    /// database's own UUID.
    static func serverID(_ location: DatabaseRegistry.Location, _ registry: DatabaseRegistry) throws -> String {
        switch location {
        case .single(let name, _):
            return registry.database(name)?.uuid.uuidString.lowercased().replacing("-", with: "") ?? ""
        case .directory(let dir):
            let path = dir + "/_server_id"
            if let data = FileManager.default.contents(atPath: path),
               let text = String(data: data, encoding: .utf8)?.trimmingWhitespace(), text.count == 32 {
                return text
            }
            let id = RESTRouter.newID()
            try Data((id + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
            return id
        }
    }
}
