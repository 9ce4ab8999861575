import FerryDNS
import FerryDiscovery
import FerryHTTP
import FerryNet
import FerryStore
import FoundationEssentials
import Logging

/// The daemon's peers (docs/daemon.md, "Discovery"): it advertises the daemon as
/// `_ferry._tcp` over multicast DNS, browses for the members of its discovery group, reads
/// static peers' database lists, and keeps one continuous push-and-pull managed replication
/// (transient) with every trusted peer for every database both serve — started when the peer
/// appears, removed when it leaves. Strangers are listed with the reason they are not trusted.
public actor PeerCoordinator {
    /// What the daemon advertises and whom it replicates with.
    public struct Configuration: Sendable {
        /// Whether to advertise on the link (`--no-advertise` turns it off).
        public var advertise = true
        /// The instance name (the host name by default).
        public var instanceName: String
        /// The group's credentials: what members and static peers authenticate with.
        public var group: DiscoveryGroup?
        /// Whether to browse for the group's members and replicate with them (`--discover`);
        /// without it the group's credentials serve only the static peers.
        public var discover = false
        /// Static peers (`--peer`): `ws[s]://` or `http[s]://host:port`, optionally with
        /// `user:password@` (else the group's credentials are used).
        public var staticPeers: [String] = []
        /// The interfaces to run mDNS on; nil = the one(s) holding the listen address (every
        /// multicast interface for a wildcard address, the loopback for a loopback address).
        public var interfaces: [String]?
        /// The TTLs of advertised records (the SRV/A TTL is how long a peer that vanished
        /// without a goodbye stays listed).
        public var ttls = MDNSTTLs()
        /// How often static peers' database lists are read again.
        public var staticRefresh: Double = 30
        /// The UDP port of mDNS (5353; tests only).
        public var mdnsPort = 5353

        /// Advertising as `instanceName`, in no group, no static peers.
        public init(instanceName: String) { self.instanceName = instanceName }
    }

    /// A peer as the daemon sees it now.
    public struct Peer: Sendable, Equatable {
        /// `mdns` or `static`.
        public var source: String
        /// The advertised record (static peers: made from the URL and its answers).
        public var record: PeerRecord
        /// Why it is not trusted; nil = trusted.
        public var distrust: String?
        /// Databases replicated with it now.
        public var replicating: [String]

        /// A peer as listed.
        public init(source: String, record: PeerRecord, distrust: String?, replicating: [String]) {
            self.source = source; self.record = record; self.distrust = distrust; self.replicating = replicating
        }
    }

    struct StaticPeer {
        var url: String
        var host: String
        var port: Int
        var tls: Bool
        var authorization: String?
        var user: String?
        var password: String?
        var databases: [String]?
        var id: String?
        var problem: String? = "not reached yet"
    }

    private let configuration: Configuration
    private let scheduler: ReplicationScheduler
    private let registry: DatabaseRegistry
    private let serverID: String
    private let listenHost: String
    private let port: Int
    private let pin: String?
    private let clientTLS: TLSClientConfiguration
    private let logger: Logger
    private let loop: EventLoop
    private var agent: MDNSAgent?
    private var discovered: [DNSName: PeerRecord] = [:]
    private var statics: [StaticPeer] = []
    private var managed: [String: (peer: String, db: String)] = [:]
    private var tasks: [Task<Void, Never>] = []
    private var advertisedDatabases: [String] = []
    private var reconfirmed: Set<String> = []
    /// The last peers that left, newest last: name, why (goodbye, expired, interface gone), when.
    private var departures: [(name: String, reason: String, at: Date)] = []

    /// A coordinator for a daemon with ID `serverID` listening on `listenHost`:`port` (with
    /// certificate pin `pin` when it serves TLS); replications it starts connect with
    /// `clientTLS`. Nothing runs until `start()`. Throws when its event loop cannot be started.
    public init(configuration: Configuration, scheduler: ReplicationScheduler, registry: DatabaseRegistry, serverID: String,
                listenHost: String, port: Int, pin: String?, clientTLS: TLSClientConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.scheduler = scheduler
        self.registry = registry
        self.serverID = serverID
        self.listenHost = listenHost
        self.port = port
        self.pin = pin
        self.clientTLS = clientTLS
        self.logger = logger
        loop = try EventLoop(name: "ferry-mdns")
    }

    /// Starts advertising, browsing (with a group) and the static peers.
    public func start() async {
        advertisedDatabases = registry.names
        if configuration.advertise || discovering {
            var c = MDNSAgent.Configuration(hostLabel: "ferry-" + serverID.prefix(12))
            c.interfaces = configuration.interfaces ?? Self.interfaces(for: listenHost)
            c.port = configuration.mdnsPort
            c.ttls = configuration.ttls
            if configuration.advertise {
                c.advertisement = ServiceAdvertisement(instanceName: configuration.instanceName, serviceType: PeerRecord.serviceType,
                                                       port: UInt16(clamping: port), txt: txt())
            }
            if discovering { c.browse = PeerRecord.serviceType }
            do {
                let agent = try await MDNSAgent.start(c, loop: loop, logger: logger)
                self.agent = agent
                tasks.append(Task { [weak self] in
                    for await event in agent.events { await self?.handle(event) }
                })
            } catch {
                // Serving goes on without the LAN; static peers still work.
                logger.warning("cannot use multicast DNS (\(error)): not advertising\(discovering ? " nor discovering" : "")")
            }
        }
        statics = configuration.staticPeers.compactMap { Self.parseStatic($0) }
        if !statics.isEmpty {
            tasks.append(Task { [weak self] in
                while !Task.isCancelled {
                    await self?.refreshStatics()
                    let wait = await self?.staticWait() ?? 30
                    try? await Task.sleep(for: .seconds(wait))
                }
            })
        }
        tasks.append(Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                await self?.watch()
            }
        })
    }

    /// Says goodbye on the link and stops; the replications stop with the scheduler.
    public func stop() async {
        for t in tasks { t.cancel() }
        tasks.removeAll()
        await agent?.stop()
        agent = nil
        loop.shutdown()
    }

    /// The advertised name now (after any rename on the link).
    public func advertisedName() async -> String? { await agent?.advertisedName()?.name }

    /// Every peer known now: discovered (trusted or not) and static.
    public func peers() -> [Peer] {
        var out: [Peer] = []
        for r in discovered.values.sorted(by: { $0.name < $1.name }) where r.id != serverID {
            // An untrusted entry replicates with nobody, even when it carries a trusted member's
            // ID (a replay of that member's advertisement).
            let why = r.distrust(in: discovering ? configuration.group : nil)
            out.append(Peer(source: "mdns", record: r, distrust: why, replicating: why == nil ? replicating(r.id) : []))
        }
        for s in statics {
            let record = PeerRecord(static: s.url, host: s.host, port: s.port, tls: s.tls, id: s.id, databases: s.databases)
            out.append(Peer(source: "static", record: record, distrust: s.problem, replicating: replicating(s.url)))
        }
        return out
    }

    /// `GET /_discovery`'s answer.
    public func snapshot() async -> JSONValue {
        var me: [String: JSONValue] = ["id": .string(serverID), "port": .int(Int64(port)), "advertise": .bool(configuration.advertise),
                                       "databases": .array(advertisedDatabases.map { .string($0) }), "tls": .bool(pin != nil)]
        if let name = await agent?.advertisedName() { me["name"] = .string(name.name) }
        if discovering, let g = configuration.group { me["group"] = .string(g.name) }
        if let pin { me["pin"] = .string(pin) }
        if let s = await agent?.statistics() {
            me["mdns"] = .object(["received": .int(Int64(s.received)), "malformed": .int(Int64(s.malformed)),
                                  "sent": .int(Int64(s.sent)), "send_failures": .int(Int64(s.sendFailures))])
        }
        let left: [JSONValue] = departures.map {
            .object(["name": .string($0.name), "reason": .string($0.reason), "time": .string($0.at.formatted(.iso8601))])
        }
        return .object(["self": .object(me), "peers": .array(peers().map { Self.json($0) }), "departed": .array(left)])
    }

    /// A peer as `/_discovery` and `ferry peers --json` show it.
    public static func json(_ p: Peer) -> JSONValue {
        let r = p.record
        var o: [String: JSONValue] = ["name": .string(r.name), "id": .string(r.id), "addresses": .array(r.addresses.map { .string($0) }),
                                      "host": .string(r.addresses.first ?? ""), "port": .int(Int64(r.port)), "tls": .bool(r.tls),
                                      "pin": r.pin.map { .string($0) } ?? .null, "group": r.group.map { .string($0) } ?? .null,
                                      "databases": r.databases.map { .array($0.map { .string($0) }) } ?? .null,
                                      "trusted": .bool(p.distrust == nil), "reason": p.distrust.map { .string($0) } ?? .null,
                                      "source": .string(p.source), "version": .string(r.version)]
        o["replicating"] = .array(p.replicating.map { .string($0) })
        return .object(o)
    }

    private func replicating(_ peer: String) -> [String] {
        managed.values.filter { $0.peer == peer }.map(\.db).sorted()
    }

    private var discovering: Bool { configuration.discover && configuration.group != nil }

    private func txt() -> [(key: String, value: String?)] {
        signedAt = Int64(Date().timeIntervalSince1970)
        signedAddresses = advertisedAddresses()
        return PeerRecord.txt(id: serverID, databases: advertisedDatabases, tls: pin != nil, pin: pin,
                              group: discovering ? configuration.group : nil, port: port,
                              addresses: signedAddresses, timestamp: signedAt)
    }

    /// When the advertisement's proof was made, and the addresses it names.
    private var signedAt: Int64 = 0
    private var signedAddresses: [String] = []

    /// The addresses of the interfaces advertised on: what the group proof binds the
    /// advertisement to.
    private func advertisedAddresses() -> [String] {
        MDNSAgent.interfaces(named: configuration.interfaces ?? Self.interfaces(for: listenHost))
            .flatMap { $0.ipv4 + $0.ipv6 }.compactMap { SocketAddress(addressBytes: $0, port: 0)?.host }.sorted()
    }

    // MARK: - Events

    private func handle(_ event: DiscoveryEvent) async {
        switch event {
        case .found(let s), .changed(let s):
            guard let r = PeerRecord(s), r.id != serverID else { return }
            let isNew = discovered[s.fullName] == nil
            discovered[s.fullName] = r
            if isNew {
                let why = r.distrust(in: configuration.group)
                logger.info("found peer \"\(r.name)\" at \(r.addresses.first ?? "?"):\(r.port)\(why.map { " — not trusted: \($0)" } ?? "")")
            }
        case .lost(let name, let reason):
            guard let r = discovered.removeValue(forKey: name) else { return }
            logger.info("peer \"\(r.name)\" left (\(reason))")
            departures = departures.suffix(19) + [(r.name, reason, Date())]
        }
        await reconcile()
    }

    private var reconciling = false
    private var reconcileAgain = false

    /// Makes the managed replications match the trusted peers and shared databases. One pass
    /// at a time: the actor is reentrant at every `await` on the scheduler, and two passes
    /// computed from different moments would undo each other's work.
    private func reconcile() async {
        if reconciling {
            reconcileAgain = true
            return
        }
        reconciling = true
        repeat {
            reconcileAgain = false
            await reconcileOnce()
        } while reconcileAgain
        reconciling = false
    }

    private func reconcileOnce() async {
        var wanted: [String: (peer: String, db: String, spec: ReplicationSpec)] = [:]
        let ours = Set(registry.names)
        guard let group = configuration.group else { return await apply(wanted: [:]) }
        var seenIDs: Set<String> = []
        for r in discovered.values.sorted(by: { $0.name < $1.name }) where discovering && r.id != serverID && r.distrust(in: group) == nil {
            guard seenIDs.insert(r.id).inserted, !statics.contains(where: { $0.id == r.id }) else { continue }
            for db in (r.databases.map(Set.init) ?? ours).intersection(ours).sorted() {
                guard let url = r.url(for: db), let spec = spec(id: "discovered-\(r.id)-\(Self.idPart(db))", db: db, url: url,
                                                                user: group.userName, password: group.password, pins: r.pin.map { [$0] } ?? []) else { continue }
                wanted[spec.id] = (r.id, db, spec)
            }
        }
        for s in statics where s.problem == nil {
            for db in Set(s.databases ?? []).intersection(ours).sorted() {
                guard let url = PeerRecord(static: s.url, host: s.host, port: s.port, tls: s.tls, id: s.id, databases: s.databases).url(for: db),
                      let spec = spec(id: "peer-\(Self.idPart(s.host))-\(s.port)-\(Self.idPart(db))", db: db, url: url,
                                      user: s.user ?? group.userName, password: s.password ?? group.password, pins: []) else { continue }
                wanted[spec.id] = (s.url, db, spec)
            }
        }
        await apply(wanted: wanted)
    }

    private func apply(wanted: [String: (peer: String, db: String, spec: ReplicationSpec)]) async {
        for (id, _) in managed where wanted[id] == nil {
            do { try await scheduler.remove(id, revision: nil) } catch { logger.debug("removing \(id): \(error)") }
            managed[id] = nil
            reconfirmed.remove(id)
        }
        for (id, w) in wanted.sorted(by: { $0.key < $1.key }) where managed[id] == nil {
            do {
                try await scheduler.put(w.spec, revision: nil, transient: true)
                managed[id] = (w.peer, w.db)
            } catch {
                logger.warning("cannot replicate \(w.db) with \(w.spec.peer): \(error)")
            }
        }
    }

    private func spec(id: String, db: String, url: String, user: String?, password: String?, pins: [String]) -> ReplicationSpec? {
        var s = ReplicationSpec(id: id, database: db, peer: url)
        s.continuous = true
        (s.user, s.password) = (user, password)
        s.pins = pins
        do { return try s.validated() } catch {
            logger.warning("cannot replicate \(db) with \(url): \(error)")
            return nil
        }
    }

    /// Once a second: a changed database list is advertised again, and a discovered peer
    /// whose replications cannot reach it is reconfirmed on the link (RFC 6762 §10.4), so a
    /// host that vanished without a goodbye is dropped in seconds rather than at its TTL.
    private func watch() async {
        let names = registry.names
        if names != advertisedDatabases {
            advertisedDatabases = names
            agent?.updateTXT(txt())
            await reconcile()
        } else if configuration.advertise, discovering,
                  Int64(Date().timeIntervalSince1970) - signedAt >= PeerRecord.proofRefresh || advertisedAddresses() != signedAddresses {
            // The proof is signed again before receivers take it for a stale replay, and when
            // this host's addresses change.
            agent?.updateTXT(txt())
        }
        guard let agent else { return }
        for (id, m) in managed where id.hasPrefix("discovered-") {
            guard let entry = scheduler.entry(id) else { continue }
            if entry.journal.state == .crashing {
                guard reconfirmed.insert(id).inserted else { continue }
                if let name = discovered.first(where: { $0.value.id == m.peer })?.key { agent.reconfirm(name) }
            } else {
                reconfirmed.remove(id)
            }
        }
    }

    // MARK: - Static peers

    private func staticWait() -> Double {
        statics.contains { $0.problem != nil } ? 2 : configuration.staticRefresh
    }

    private func refreshStatics() async {
        let tls = clientTLS
        for i in statics.indices {
            let s = statics[i]
            let authorization: String?
            if let u = s.user ?? configuration.group?.userName, let p = s.password ?? configuration.group?.password {
                authorization = "Basic " + Data("\(u):\(p)".utf8).base64EncodedString()
            } else {
                authorization = nil
            }
            do {
                let (info, dbs) = try await PeerInfoClient.identity(host: s.host, port: s.port, tls: s.tls ? tls : nil,
                                                                    authorization: authorization)
                statics[i].id = info.objectValue?["uuid"]?.stringValue
                statics[i].databases = dbs.arrayValue?.compactMap(\.stringValue)
                if statics[i].problem != nil { logger.info("static peer \(Self.redacted(s.url)) answers: \(statics[i].databases ?? [])") }
                statics[i].problem = statics[i].id == serverID ? "this daemon itself" : nil
            } catch {
                let problem = "\(error)"
                if s.problem != problem { logger.info("static peer \(Self.redacted(s.url)): \(problem)") }
                // A peer that stopped answering keeps its replications: the replicator's own
                // retries cover an outage; only its database list goes stale.
                if s.databases == nil { statics[i].problem = problem }
            }
        }
        await reconcile()
    }

    static func parseStatic(_ url: String) -> StaticPeer? {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), let host = c.host, !host.isEmpty else { return nil }
        let tls: Bool
        switch scheme {
        case "ws", "http": tls = false
        case "wss", "https": tls = true
        default: return nil
        }
        let h = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return StaticPeer(url: url, host: h, port: c.port ?? (tls ? 443 : 80), tls: tls, authorization: nil,
                          user: c.user.flatMap { PercentEncoding.decode($0) }, password: c.password.flatMap { PercentEncoding.decode($0) })
    }

    /// Whether `url` can name a static peer.
    public static func isValidStaticPeer(_ url: String) -> Bool { parseStatic(url) != nil }

    static func redacted(_ url: String) -> String {
        guard var c = URLComponents(string: url), c.password != nil else { return url }
        c.password = "***"
        return c.string ?? url
    }

    /// Characters a replication ID may hold, from a database name or host.
    static func idPart(_ s: String) -> String {
        String(s.map { $0.isLetter || $0.isNumber || $0 == "." || $0 == "_" || $0 == "-" ? $0 : "_" })
    }

    /// The interfaces that hold `host`: the loopback for a loopback address, nil (every
    /// multicast interface) for a wildcard or an address no interface holds.
    static func interfaces(for host: String) -> [String]? {
        if ["127.0.0.1", "::1", "localhost"].contains(host) { return ["lo"] }
        if ["0.0.0.0", "::", ""].contains(host) { return nil }
        guard let a = try? SocketAddress(ipAddress: host, port: 0) else { return nil }
        let bytes = a.addressBytes
        let holding = NetworkInterface.all().filter { $0.ipv4.contains(bytes) || $0.ipv6.contains(bytes) }.map(\.name)
        return holding.isEmpty ? nil : holding
    }
}

extension PeerRecord {
    /// A static peer shown with the same fields as a discovered one.
    init(static url: String, host: String, port: Int, tls: Bool, id: String?, databases: [String]?) {
        name = PeerCoordinator.redacted(url)
        self.id = id ?? ""
        version = ""
        addresses = [host]
        self.port = port
        self.databases = databases
        self.tls = tls
        pin = nil
        group = nil
        proof = nil
    }
}
