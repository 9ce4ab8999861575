import FerryBLIP
import FerryNet
import FerryStore
import FerryWebSocket
import FoundationEssentials
import Logging
import Synchronization

/// The passive side of replication: serves databases at `ws://host:port/<name>/_blipsync`
/// (subprotocol `BLIP_3+CBMobile_3`) for any number of clients pushing and pulling at once —
/// Couchbase Lite's peer-to-peer listener.
///
/// With credentials set, every upgrade must carry matching HTTP Basic authentication; anything
/// else is answered 401 with `WWW-Authenticate` before any upgrade, so nothing is read or
/// written for an unauthenticated client.
public final class SyncListener: Sendable {
    /// The replication app protocol Ferry speaks.
    public static let app = ReplicationProtocol.app

    /// Listener settings.
    public struct Configuration: Sendable {
        /// Address to bind.
        public var host = "127.0.0.1"
        /// Port (0 = any free port; see `port`).
        public var port = 4984
        /// Required HTTP Basic credentials; nil = open.
        public var credentials: (user: String, password: String)?
        /// WebSocket settings (connection limit, handshake timeout, ...).
        public var webSocket: WebSocketConfiguration?
        /// Seconds between WebSocket pings to each idle client; a client that misses the pong
        /// for as long again is dropped, so a peer that vanished without a close (power cut,
        /// partition, paused process) does not keep its session and feed forever. 0 = off.
        /// Overrides `webSocket`'s ping settings. Default 60.
        public var heartbeat: Double = 60
        /// Connections (handshaking, open, or serving plain HTTP) beyond this get 503 and
        /// close; open ones keep working. Overrides `webSocket`'s. Default 100,000.
        public var maxConnections = 100_000
        /// The same, per client address (its host). Overrides `webSocket`'s. Default 1,000.
        public var maxConnectionsPerAddress = 1_000
        /// Serve `wss://` with this certificate (and, optionally, require client
        /// certificates); plain `ws://` when nil (the default, for trusted LANs and tests).
        public var tls: TLSServerConfiguration?
        /// Every client may only pull (Couchbase Lite's read-only listener): pushes are
        /// answered BLIP error 403 and nothing is written.
        public var readOnly = false
        /// Decides each client before its upgrade, given the request and the database name in
        /// its path; replaces `credentials` when set (a daemon's users and roles). It runs off
        /// the event loop (it may verify a password), and the upgrade waits for it.
        public var authorize: (@Sendable (UpgradeRequest, String) async -> PeerAccess)?
        /// Takes connections whose first request is not a WebSocket upgrade (a REST API on
        /// the same port); without it they are refused.
        public var plainHTTP: WebSocketListener.PlainHTTPHandler?
        /// A configuration with the defaults (127.0.0.1:4984, no authentication).
        public init() {}
    }

    /// What a client may do with a database, as `Configuration.authorize` decides.
    public enum PeerAccess: Sendable {
        /// Push and pull, design documents too (CouchDB's database admin).
        case admin
        /// Push and pull, except design documents (`_design/…`): each is refused with 403, as
        /// CouchDB refuses them to its database members.
        case readWrite
        /// Pull only; its pushes are refused with 403.
        case readOnly
        /// Refuse the upgrade with this HTTP status (401 with `WWW-Authenticate`, 403, ...).
        case refuse(status: Int, message: String, headers: HTTPHeaders)
    }

    /// Filters and open connections, shared with the upgrade hook (which runs before `self` exists).
    final class Shared: Sendable {
        let filters = Mutex<[String: PullFilter]>([:])
        let peers = Mutex<[ObjectIdentifier: BLIPConnection]>([:])
        let events = Broadcaster<DocumentEvent>()
        let counters = Counters()
        let reporter: Reporter
        init() {
            let (events, counters) = (self.events, self.counters)
            reporter = Reporter(onEvent: { events.send($0) }, wantsEvents: { !events.isEmpty },
                                onRevisionsSent: { counters.revMessages.add($0, ordering: .relaxed) })
        }
    }

    final class Counters: Sendable {
        let revMessages = Atomic<Int>(0)
        let connections = Atomic<Int>(0)
    }

    /// What a listener has done since it started.
    public struct Statistics: Sendable, Equatable {
        /// Revisions clients pulled and acknowledged.
        public var revisionsSent: Int
        /// `rev` messages sent (acknowledged or not: what a client interrupted mid-batch got again).
        public var revisionMessagesSent: Int
        /// Revisions clients pushed that were stored.
        public var revisionsReceived: Int
        /// Client connections accepted.
        public var connectionsAccepted: Int
    }

    /// Counters since start.
    public var statistics: Statistics {
        let c = shared.counters
        return Statistics(revisionsSent: shared.reporter.count(of: .pushed), revisionMessagesSent: c.revMessages.load(ordering: .relaxed),
                          revisionsReceived: shared.reporter.count(of: .pulled), connectionsAccepted: c.connections.load(ordering: .relaxed))
    }

    /// Document events of every client connection from now on: `.pushed` = a client pulled and
    /// stored it, `.pulled` = a client pushed it and it was stored here, `.failed` = refused.
    public func documentEvents() -> AsyncStream<DocumentEvent> { shared.events.stream() }

    private let listener: WebSocketListener
    private let shared: Shared
    /// The host bound.
    public let host: String
    /// The port bound.
    public var port: Int { listener.port }
    /// Whether it serves `wss://`.
    public let secure: Bool

    private init(listener: WebSocketListener, host: String, secure: Bool, shared: Shared) {
        self.listener = listener
        self.host = host
        self.secure = secure
        self.shared = shared
    }

    /// The URL a replicator uses for the database served as `name`.
    public func url(for name: String) -> String { "\(secure ? "wss" : "ws")://\(host):\(port)/\(name)" }

    /// Starts serving `databases` (name → database; names must not start with `_`).
    public static func start(serving databases: [String: Database], configuration: Configuration = Configuration(),
                             group: EventLoopGroup = .shared,
                             logger: Logger = Logger(label: "ferry.sync.listener")) async throws(ReplicationError) -> SyncListener {
        for name in databases.keys where name.isEmpty || name.hasPrefix("_") || name.contains("/") {
            throw .invalidURL("database name \(name.debugDescription)")
        }
        return try await start(resolving: { databases[$0] }, configuration: configuration, group: group, logger: logger)
    }

    /// Starts serving the databases `resolve` finds by name (nil: 404), so a daemon can add
    /// and remove databases while it runs. Names may contain `/` (the path up to
    /// `/_blipsync`).
    public static func start(resolving resolve: @escaping @Sendable (String) -> Database?, configuration: Configuration = Configuration(),
                             group: EventLoopGroup = .shared,
                             logger: Logger = Logger(label: "ferry.sync.listener")) async throws(ReplicationError) -> SyncListener {
        let shared = Shared()
        let expected = configuration.credentials.map { "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString() }
        var ws = configuration.webSocket ?? BLIPConnection.webSocketConfiguration(app: app)
        ws.subprotocols = [BLIPConnection.subprotocol(app: app)]
        ws.maxConnections = configuration.maxConnections
        ws.maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
        if configuration.heartbeat > 0 {
            ws.pingInterval = configuration.heartbeat
            ws.pingTimeout = configuration.heartbeat
        }
        var tls: TLSContext?
        if let config = configuration.tls {
            do throws(TLSError) { tls = try TLSContext(server: config) } catch { throw .tls(error) }
        }
        let listener: WebSocketListener
        do {
            listener = try await WebSocketListener.bind(host: configuration.host, port: configuration.port, group: group,
                                                        configuration: ws, tls: tls, logger: logger,
                                                        plainHTTP: configuration.plainHTTP) { request, loop in
                let suffix = "/" + ReplicationProtocol.endpoint
                let path = request.path
                guard path.hasPrefix("/"), path.hasSuffix(suffix), path.count > suffix.count + 1 else {
                    return .refuse(status: 404, message: "no database at \(path)")
                }
                let name = PercentEncoding.decode(String(path.dropFirst().dropLast(suffix.count))) ?? ""
                guard let db = resolve(name) else {
                    return .refuse(status: 404, message: "no database at \(path)")
                }
                // Accepts on the loop, once what the client may do is known.
                // Without `authorize` there are no roles: whoever may push may push anything,
                // design documents too.
                let open = { (readOnly: Bool, designDocuments: Bool) -> UpgradeDecision in
                    BLIPConnection.accept(request, on: loop, app: app, logger: logger) { conn in
                        let key = ObjectIdentifier(conn)
                        shared.peers.withLock { $0[key] = conn }
                        shared.counters.connections.add(1, ordering: .relaxed)
                        let peer = PassivePeer(database: db, connection: conn, listener: shared, readOnly: readOnly,
                                               designDocuments: designDocuments, logger: logger)
                        peer.register()
                        Task {
                            await peer.serve()
                            shared.peers.withLock { _ = $0.removeValue(forKey: key) }
                        }
                    }
                }
                if let authorize = configuration.authorize {
                    // Decided off the loop (a password check is a PBKDF2 run), then
                    // answered on it.
                    return .deferred { decide in
                        // Confinement (UncheckedTransfer rule 1): `decide` and `open` are
                        // called only in the closure `loop.execute` runs on this loop.
                        let back = UncheckedTransfer((decide, open))
                        Task {
                            let access = await authorize(request, name)
                            _ = loop.execute {
                                let (decide, open) = back.value
                                switch access {
                                case .admin: decide(open(configuration.readOnly, true))
                                case .readWrite: decide(open(configuration.readOnly, false))
                                case .readOnly: decide(open(true, false))
                                case let .refuse(status, message, headers):
                                    logger.info("refused client", metadata: ["peer": "\(request.remoteAddress.map { "\($0)" } ?? "?")", "status": "\(status)"])
                                    decide(.refuse(status: status, message: message, headers: headers))
                                }
                            }
                        }
                    }
                } else if let expected, request.headers["Authorization"] != expected {
                    logger.info("refused unauthenticated client", metadata: ["peer": "\(request.remoteAddress.map { "\($0)" } ?? "?")"])
                    return .refuse(status: 401, message: "login required",
                                   headers: HTTPHeaders([("WWW-Authenticate", #"Basic realm="Ferry""#)]))
                }
                return open(configuration.readOnly, true)
            }
        } catch {
            throw .connection("cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        return SyncListener(listener: listener, host: configuration.host, secure: tls != nil, shared: shared)
    }

    /// Runs the WebSocket upgrade on a connection the `plainHTTP` handler took, once a request
    /// on it asks for one (`request` as that handler parsed it, `rest` what followed). Call on
    /// its loop.
    public func upgrade(_ connection: HandedOffConnection, request: HTTPRequestHead, rest: [UInt8]) {
        listener.upgrade(connection, request: request, rest: rest)
    }

    /// Registers a named pull filter that clients select with `pullFilter` (and parameters).
    public func registerPullFilter(_ name: String, _ filter: @escaping PullFilter) {
        shared.filters.withLock { $0[name] = filter }
    }

    /// Clients connected now.
    public var connectionCount: Int { shared.peers.withLock { $0.count } }

    /// Stops accepting and closes every client connection with WebSocket 1001 ("going
    /// away"), which tells a client the server is leaving, not that it refused the client:
    /// a replicator retries later (from its checkpoint).
    ///
    /// A client gets `gracePeriod` seconds to answer the close; one that does not (it stopped
    /// reading, so the close frame waits behind the revisions already queued for it) is
    /// dropped. Cancelling the calling task drops every connection still open at once.
    public func stop(gracePeriod: Double = 2) async {
        await listener.close()
        let all = shared.peers.withLock { Array($0.values) }
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { g in
                for c in all { g.addTask { await c.close(code: .goingAway, reason: "server shutting down", timeout: gracePeriod) } }
            }
        } onCancel: {
            for c in all { c.abort(reason: "server shutting down") }
        }
    }
}
