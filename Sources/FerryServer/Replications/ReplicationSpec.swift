import FerryHTTP
import FerryNet
import FerryStore
import FerrySync
import FoundationEssentials

/// What an operator asks of one managed replication (Protocol/replicator.md): a replication
/// document, CouchDB `_replicator`-shaped, between one local database and one peer.
///
/// Either `database` + `peer` + `direction`, or CouchDB's `source` + `target` (one a local
/// database name, the other a peer URL; the direction follows). The peer URL's scheme picks the
/// protocol: `http(s)://` CouchDB's replication protocol (CouchDB, Cloudant, PouchDB Server, or
/// a Ferry peer's REST API), `ws(s)://` BLIP; `"protocol": "blip"` reaches an `http(s)://`
/// URL (a Sync Gateway given so) as `ws(s)://`. Credentials are kept with the document but
/// never shown again (`publicJSON`).
public struct ReplicationSpec: Sendable, Equatable {
    /// Which way documents go, seen from the local database.
    public enum Direction: String, Sendable, CaseIterable {
        /// Local changes go to the peer.
        case push
        /// The peer's changes come here.
        case pull
        /// Both.
        case both
    }

    /// How a pulled conflict is settled.
    public enum ConflictPolicy: String, Sendable, CaseIterable {
        /// The store's rule: a deletion wins, then the longer branch, then the higher revision.
        case `default`
        /// The local revision wins.
        case local
        /// The peer's revision wins.
        case remote
    }

    /// Runs push-and-pull every `every` seconds (`backgroundEvery` in background mode), each
    /// run stopping cleanly after `budget` seconds (0 = no budget).
    public struct Schedule: Sendable, Equatable {
        /// Seconds between run starts in active mode.
        public var every: Double
        /// Seconds between run starts in background mode (default: `every`).
        public var backgroundEvery: Double?
        /// The most seconds one run may take; 0 = until caught up.
        public var budget: Double

        /// A schedule.
        public init(every: Double, backgroundEvery: Double? = nil, budget: Double = 0) {
            self.every = every
            self.backgroundEvery = backgroundEvery
            self.budget = budget
        }
    }

    /// When a run may start.
    public struct Conditions: Sendable, Equatable {
        /// Only while one of these network interfaces is up and running (empty = any).
        public var interfaces: [String] = []
        /// Only when the peer answers a TCP connect.
        public var reachable = false

        /// No conditions.
        public init(interfaces: [String] = [], reachable: Bool = false) {
            self.interfaces = interfaces
            self.reachable = reachable
        }

        /// Whether there are none.
        public var isEmpty: Bool { interfaces.isEmpty && !reachable }
    }

    /// The document's ID.
    public var id: String
    /// The local database's name.
    public var database: String
    /// The peer's database URL, `ws(s)://` or `http(s)://host:port/db`, without credentials.
    public var peer: String
    /// Which protocol speaks to the peer (default: by the URL's scheme).
    public var peerProtocol = ReplicatorConfiguration.PeerProtocol.automatic
    /// Push, pull or both.
    public var direction: Direction = .both
    /// Keep running after catching up (ignored with a schedule).
    public var continuous = false
    /// Only these documents.
    public var documentIDs: [String]?
    /// A pull filter registered on the peer, and its parameters.
    public var filter: String?
    /// Parameters of `filter`.
    public var queryParameters: [String: String] = [:]
    /// A Mango selector for both directions (CouchDB's `selector` member; `ReplicatorConfiguration.selector`).
    public var selector: JSONValue?
    /// Basic credentials for the peer (write-only through the API).
    public var user: String?
    /// The password of `user`.
    public var password: String?
    /// SHA-256 pins of the peer's certificate (hex); with pins, only a pinned certificate is trusted.
    public var pins: [String] = []
    /// How pulled conflicts are settled.
    public var conflicts: ConflictPolicy = .default
    /// Documents per batch (nil = the replicator's default).
    public var batchSize: Int?
    /// Seconds between WebSocket pings (nil = the daemon's).
    public var heartbeat: Double?
    /// Periodic runs instead of one-shot or continuous.
    public var schedule: Schedule?
    /// When runs may start.
    public var conditions = Conditions()
    /// Attachment download rules for pulls (`AttachmentDownloadRule` JSON), in order.
    public var download: [JSONValue] = []

    /// A replication of `database` with `peer`.
    public init(id: String, database: String, peer: String, direction: Direction = .both) {
        self.id = id
        self.database = database
        self.peer = peer
        self.direction = direction
    }

    /// Whether `id` can name a replication document: not empty, no `/`, and not starting with
    /// `_` (CouchDB's rule: such IDs are its routes and its transient jobs).
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && !id.hasPrefix("_") && !id.contains("/") && id.utf8.count <= 256
    }

    /// The ID a replication of `database` with `peer` gets when none is given, made here only:
    /// `DATABASE-HOST-PORT` (`ferry replication add`), or `PREFIX-DATABASE-HOST-PORT-PATH…`
    /// with a prefix and the path (`ferry serve --replicate`, whose peers may share a host and
    /// port). Parts the URL lacks are left out. The two forms stay apart because IDs already
    /// stored, or scripted against, must not change.
    public static func defaultID(database: String, peer: String, prefix: String? = nil, includingPath: Bool = false) -> String {
        let c = URLComponents(string: peer)
        var parts = [prefix, database, c?.host, c?.port.map(String.init)].compactMap { $0 }
        if includingPath { parts += c?.path.split(separator: "/").map(String.init) ?? [] }
        return parts.joined(separator: "-")
    }

    /// Why a replication document is refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// For people.
        public let reason: String
        init(_ reason: String) { self.reason = reason }
        public var description: String { reason }
    }

    /// Reads a replication document (`_id` given separately when it comes from the URL).
    public init(id: String, json given: [String: JSONValue]) throws(Invalid) {
        var o = given
        // CouchDB's `{"url":…,"headers":{"Authorization":"Basic …"}}` form of source and target.
        for key in ["source", "target"] {
            guard let endpoint = o[key]?.objectValue else { continue }
            o[key] = .string(try Self.url(of: endpoint, key))
        }
        func string(_ k: String) throws(Invalid) -> String? {
            guard let v = o[k], v != .null else { return nil }
            guard let s = v.stringValue else { throw Invalid("\(k) must be a string") }
            return s
        }
        func bool(_ k: String) throws(Invalid) -> Bool? {
            guard let v = o[k], v != .null else { return nil }
            guard let b = v.boolValue else { throw Invalid("\(k) must be true or false") }
            return b
        }
        self.id = id
        let database: String
        let peer: String
        var direction = Direction.both
        // database + peer (+ direction) is Ferry's form; source + target CouchDB's. A document
        // read back through the API has both (consistent), so the first wins.
        if let d = try string("database"), let p = try string("peer") {
            (database, peer) = (d, p)
            if let t = try string("direction") {
                guard let v = Direction(rawValue: t) else { throw Invalid("direction must be push, pull or both") }
                direction = v
            }
        } else if let s = try string("source"), let t = try string("target") {
            switch (Self.isRemote(s), Self.isRemote(t)) {
            case (false, true): (database, peer, direction) = (s, t, .push)
            case (true, false): (database, peer, direction) = (t, s, .pull)
            case (true, true): throw Invalid("one of source and target must be a local database (Ferry replicates between this peer and another)")
            case (false, false): throw Invalid("one of source and target must be a peer URL (ws://, wss://, http:// or https://)")
            }
        } else {
            throw Invalid("a replication needs database and peer (or source and target)")
        }
        guard (try? DatabaseName(database)) != nil else { throw Invalid("\(database.debugDescription) is not a database name") }
        guard let (plain, user, password) = Self.normalizePeer(peer) else {
            throw Invalid("\(peer.debugDescription) is not a peer URL (http(s)://host:port/db or ws(s)://host:port/db)")
        }
        if let p = try string("protocol") {
            guard let v = ReplicatorConfiguration.PeerProtocol(rawValue: p) else { throw Invalid("protocol must be automatic, couchdb or blip") }
            peerProtocol = v
        }
        guard (user == nil) == (password == nil) else { throw Invalid("the peer URL names a user without a password, or a password without a user") }
        self.database = database
        self.peer = plain
        self.direction = direction
        continuous = try bool("continuous") ?? false
        if let ids = o["doc_ids"], ids != .null {
            guard let a = ids.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else { throw Invalid("doc_ids must be an array of strings") }
            documentIDs = a.compactMap(\.stringValue)
        }
        filter = try string("filter")
        if let sel = o["selector"], sel != .null {
            guard sel.objectValue != nil else { throw Invalid("selector must be a JSON object") }
            selector = sel
        }
        if let q = o["query_params"], q != .null {
            guard let qo = q.objectValue else { throw Invalid("query_params must be an object") }
            for (k, v) in qo {
                switch v {
                case .string(let s): queryParameters[k] = s
                case .int(let i): queryParameters[k] = String(i)
                case .bool(let b): queryParameters[k] = String(b)
                case .double(let d): queryParameters[k] = String(d)
                default: throw Invalid("query_params values must be strings, numbers or booleans")
                }
            }
        }
        (self.user, self.password) = (user, password)
        if let auth = o["auth"], auth != .null {
            guard let basic = auth.objectValue?["basic"]?.objectValue, let u = basic["username"]?.stringValue,
                  let p = basic["password"]?.stringValue else {
                throw Invalid(#"auth must be {"basic":{"username":…,"password":…}}"#)
            }
            (self.user, self.password) = (u, p)
        }
        if let pins = o["tls_pins"], pins != .null {
            guard let a = pins.arrayValue?.compactMap(\.stringValue), a.count == pins.arrayValue?.count else {
                throw Invalid("tls_pins must be an array of SHA-256 digests (hex)")
            }
            for p in a where CertificatePin(.certificate, hex: p) == nil { throw Invalid("tls_pins: \(p) is not a SHA-256 digest (64 hex digits)") }
            self.pins = a
        }
        if let c = try string("conflicts") {
            guard let v = ConflictPolicy(rawValue: c) else { throw Invalid("conflicts must be default, local or remote") }
            conflicts = v
        }
        if let b = o["batch_size"], b != .null {
            guard let n = b.intValue, n >= 1, n <= 100_000 else { throw Invalid("batch_size must be an integer from 1 to 100000") }
            batchSize = Int(n)
        }
        if let h = o["heartbeat"], h != .null {
            let v = try Self.seconds(h, "heartbeat")
            guard v == 0 || v >= 1 else { throw Invalid("heartbeat must be 0 (no pings) or at least 1 s") }
            heartbeat = v
        }
        if let s = o["schedule"], s != .null {
            guard let so = s.objectValue, let every = so["every"] else { throw Invalid(#"schedule must be {"every":…, "budget":…}"#) }
            var sched = Schedule(every: try Self.seconds(every, "schedule.every"))
            guard sched.every >= 1 else { throw Invalid("schedule.every must be at least 1 s") }
            if let b = so["background_every"], b != .null { sched.backgroundEvery = try Self.seconds(b, "schedule.background_every") }
            guard (sched.backgroundEvery ?? 1) >= 1 else { throw Invalid("schedule.background_every must be at least 1 s") }
            if let b = so["budget"], b != .null { sched.budget = try Self.seconds(b, "schedule.budget") }
            schedule = sched
        }
        if let c = o["conditions"], c != .null {
            guard let co = c.objectValue else { throw Invalid("conditions must be an object") }
            if let i = co["interfaces"], i != .null {
                guard let a = i.arrayValue?.compactMap(\.stringValue), a.count == i.arrayValue?.count else {
                    throw Invalid("conditions.interfaces must be an array of interface names")
                }
                conditions.interfaces = a
            }
            if let r = co["reachable"], r != .null {
                guard let b = r.boolValue else { throw Invalid("conditions.reachable must be true or false") }
                conditions.reachable = b
            }
        }
        if let d = o["download"], d != .null {
            guard let a = d.arrayValue, a.allSatisfy({ $0.objectValue != nil }) else { throw Invalid("download must be an array of rules") }
            _ = try DownloadRules.decode(a)
            download = a
        }
    }

    /// This spec checked as a document is (`init(id:json:)`), so one built in code (`ferry
    /// replication add`) meets the daemon's rules before it is stored or sent; credentials in
    /// its peer URL are split off into `user` and `password` on the way.
    public func validated() throws(Invalid) -> ReplicationSpec {
        try ReplicationSpec(id: id, json: storedJSON)
    }

    /// The stored form, credentials included.
    public var storedJSON: [String: JSONValue] { json(password: password) }

    /// What the API shows: the stored form with the password replaced by `"***"` (credentials
    /// are write-only, as CouchDB's scheduler redacts them) and CouchDB's `source` and
    /// `target` for a one-way replication.
    public var publicJSON: [String: JSONValue] {
        var o = json(password: "***")
        switch direction {
        case .push: (o["source"], o["target"]) = (.string(database), .string(peer))
        case .pull: (o["source"], o["target"]) = (.string(peer), .string(database))
        case .both: break
        }
        return o
    }

    private func json(password: String?) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["database": .string(database), "peer": .string(peer), "direction": .string(direction.rawValue),
                                      "continuous": .bool(continuous)]
        if let documentIDs { o["doc_ids"] = .array(documentIDs.map { .string($0) }) }
        if let filter { o["filter"] = .string(filter) }
        if let selector { o["selector"] = selector }
        if peerProtocol != .automatic { o["protocol"] = .string(peerProtocol.rawValue) }
        if !queryParameters.isEmpty { o["query_params"] = .object(queryParameters.mapValues { .string($0) }) }
        if let user, let password { o["auth"] = .object(["basic": .object(["username": .string(user), "password": .string(password)])]) }
        if !pins.isEmpty { o["tls_pins"] = .array(pins.map { .string($0) }) }
        if conflicts != .default { o["conflicts"] = .string(conflicts.rawValue) }
        if let batchSize { o["batch_size"] = .int(Int64(batchSize)) }
        if let heartbeat { o["heartbeat"] = .double(heartbeat) }
        if let schedule {
            var s: [String: JSONValue] = ["every": .double(schedule.every), "budget": .double(schedule.budget)]
            if let b = schedule.backgroundEvery { s["background_every"] = .double(b) }
            o["schedule"] = .object(s)
        }
        if !conditions.isEmpty {
            o["conditions"] = .object(["interfaces": .array(conditions.interfaces.map { .string($0) }), "reachable": .bool(conditions.reachable)])
        }
        if !download.isEmpty { o["download"] = .array(download) }
        return o
    }

    /// A new spec with the credentials of `old` kept when this one names the same user without
    /// a real password (a document read back through the API and written again).
    func keepingCredentials(of old: ReplicationSpec) -> ReplicationSpec {
        var s = self
        if s.password == "***", s.user == old.user { s.password = old.password }
        return s
    }

    /// The URL of a `{"url":…,"headers":{…}}` endpoint, an `Authorization: Basic` header's
    /// credentials put in it (the only header Ferry's replications can send).
    static func url(of endpoint: [String: JSONValue], _ key: String) throws(Invalid) -> String {
        guard let url = endpoint["url"]?.stringValue else { throw Invalid("\(key).url must be a string") }
        var credentials: (String, String)?
        for (name, value) in endpoint["headers"]?.objectValue ?? [:] {
            guard name.lowercased() == "authorization", let v = value.stringValue, let c = AccessControl.basicCredentials(v) else {
                throw Invalid("\(key).headers: only an Authorization: Basic header is supported")
            }
            credentials = c
        }
        guard let (user, password) = credentials else { return url }
        guard var c = URLComponents(string: url), c.user == nil else { throw Invalid("\(key): credentials both in the URL and in headers") }
        c.user = user
        c.password = password
        return c.string ?? url
    }

    static func isRemote(_ s: String) -> Bool {
        let l = s.lowercased()
        return l.hasPrefix("ws://") || l.hasPrefix("wss://") || l.hasPrefix("http://") || l.hasPrefix("https://")
    }

    /// A peer URL with its credentials split off; nil if it is not a `ws(s)://` or
    /// `http(s)://` URL with a host and a database.
    static func normalizePeer(_ url: String) -> (String, String?, String?)? {
        guard var c = URLComponents(string: url), let scheme = c.scheme?.lowercased(), c.host?.isEmpty == false,
              ["ws", "wss", "http", "https"].contains(scheme) else { return nil }
        let user = c.user.map { PercentEncoding.decode($0) ?? $0 }
        let password = c.password.map { PercentEncoding.decode($0) ?? $0 }
        c.user = nil
        c.password = nil
        guard let plain = c.string, c.path.count > 1 else { return nil }
        return (plain, user, password)
    }

    /// Seconds from a number or a string like `"15m"`, `"30s"`, `"1h"`, `"500ms"`.
    static func seconds(_ v: JSONValue, _ name: String) throws(Invalid) -> Double {
        // At most a year: a larger one (1e300, "inf") would trap converting to a Duration.
        if let d = v.doubleValue ?? v.stringValue.flatMap(parseDuration), d >= 0, d <= 365 * 86400 { return d }
        throw Invalid("\(name) must be seconds or a duration such as 30s, 15m, 1h (at most 365 days)")
    }

    /// `"15m"` → 900; nil if not a duration.
    public static func parseDuration(_ text: String) -> Double? {
        let s = text.trimmingASCIIWhitespace().lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        for (u, f) in units where s.hasSuffix(u) {
            guard let n = Double(s.dropLast(u.count)), n >= 0 else { continue }
            return n * f
        }
        return Double(s).flatMap { $0 >= 0 ? $0 : nil }
    }
}
