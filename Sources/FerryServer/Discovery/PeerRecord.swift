import FerryDiscovery
import FerryHTTP
import FerryNet
import FoundationEssentials

/// What a Ferry peer advertises about itself in its `_ferry._tcp` TXT record
/// (Protocol/dns-sd.md, "Ferry's service"), and what it is to this daemon: trusted or not,
/// and why.
public struct PeerRecord: Sendable, Equatable {
    /// The service type Ferry advertises.
    public static let serviceType = "_ferry._tcp"
    /// The TXT `v` this version writes.
    public static let protocolVersion = "1"
    /// A `dbs` value longer than this is not sent; `dbs=*` says "ask over REST" instead.
    static let maxDatabasesText = 200

    /// The instance name.
    public var name: String
    /// The peer's stable ID (`GET /`'s uuid).
    public var id: String
    /// The TXT `v`.
    public var version: String
    /// Its addresses, IPv4 first (static peers: the host of the URL).
    public var addresses: [String]
    /// The port it serves BLIP and REST on (the SRV port).
    public var port: Int
    /// The databases it offers; nil when it did not list them (`dbs=*`).
    public var databases: [String]?
    /// Whether it serves TLS (`wss://`, `https://`): TXT `tls=1`, or a static peer's URL scheme.
    public var tls: Bool
    /// The SHA-256 of its leaf certificate (DER), 64 hex digits: TXT `pin`; nil when not
    /// advertised (no TLS, or a static peer).
    public var pin: String?
    /// The discovery group it says it is in: TXT `grp`; nil for none.
    public var group: String?
    /// Its group proof (TXT `proof`), checked against the group's secret by `distrust(in:)`.
    public var proof: String?
    /// The addresses its proof names (TXT `addr`, comma-separated): the only ones it is
    /// reached at once trusted.
    public var signedAddresses: [String] = []
    /// When its proof was made (TXT `ts`, seconds since 1970).
    public var timestamp: Int64?

    /// How far a proof's time may be from this host's clock, either way, before the
    /// advertisement is taken for a replay (advertisers sign again every `proofRefresh`).
    public static let proofLifetime: Int64 = 900
    /// How often an advertiser signs its advertisement again.
    public static let proofRefresh: Int64 = 300
    /// The longest `addr` value sent: addresses past it are left out (and not trusted).
    static let maxAddressText = 200

    /// The TXT pairs of an advertisement; with a group, its proof signs `addresses` (as many
    /// as fit in one TXT string, IPv4 first) and `timestamp`.
    public static func txt(id: String, databases: [String], tls: Bool, pin: String?, group: DiscoveryGroup?, port: Int,
                           addresses: [String] = [], timestamp: Int64 = 0) -> [(key: String, value: String?)] {
        let dbs = databases.joined(separator: ",")
        var pairs: [(key: String, value: String?)] = [("v", protocolVersion), ("id", id),
                                                     ("dbs", dbs.utf8.count <= maxDatabasesText ? dbs : "*"), ("tls", tls ? "1" : "0")]
        if let pin { pairs.append(("pin", pin)) }
        if let group {
            pairs.append(("grp", group.name))
            var signed: [String] = []
            for a in addresses.sorted(by: { ($0.contains(":") ? 1 : 0, $0) < ($1.contains(":") ? 1 : 0, $1) }) {
                guard (signed + [a]).joined(separator: ",").utf8.count <= maxAddressText else { break }
                signed.append(a)
            }
            let claim = DiscoveryGroup.Claim(peerID: id, port: port, pin: pin, addresses: signed, timestamp: timestamp)
            if let proof = group.proof(claim) {
                pairs.append(("addr", signed.joined(separator: ",")))
                pairs.append(("ts", String(timestamp)))
                pairs.append(("proof", proof))
            }
        }
        return pairs
    }

    /// A found service read as a Ferry peer; nil if it is not one (no `id`).
    public init?(_ s: DiscoveredService) {
        guard let id = s.value("id"), !id.isEmpty else { return nil }
        name = s.name
        self.id = id
        version = s.value("v") ?? ""
        addresses = s.addresses
        port = Int(s.port)
        let dbs = s.value("dbs") ?? ""
        databases = dbs == "*" ? nil : dbs.split(separator: ",").map(String.init)
        tls = s.value("tls") == "1"
        pin = s.value("pin")
        group = s.value("grp")
        proof = s.value("proof")
        signedAddresses = (s.value("addr") ?? "").split(separator: ",").map(String.init)
        timestamp = s.value("ts").flatMap { Int64($0) }
    }

    /// The addresses it is reached at: those its proof names, when it carries one.
    public var reachableAddresses: [String] {
        proof == nil ? addresses : addresses.filter { signedAddresses.contains($0) }
    }

    /// The URL of database `db` on this peer (its first address its proof names).
    public func url(for db: String) -> String? {
        guard let host = reachableAddresses.first else { return nil }
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "wss" : "ws")://\(h):\(port)/\(PercentEncoding.encode(db))"
    }

    /// Whether this daemon, a member of `group`, may replicate with the peer; nil = trusted,
    /// else why not. A stranger is listed, never trusted; so is an advertisement whose proof
    /// is more than `proofLifetime` from `now` or names none of the addresses it came with —
    /// a member's advertisement replayed by another host (Protocol/dns-sd.md, "What an
    /// attacker on the link can do").
    public func distrust(in group: DiscoveryGroup?, now: Int64 = Int64(Date().timeIntervalSince1970)) -> String? {
        guard let group else { return "this daemon is in no discovery group" }
        guard self.group == group.name else { return self.group.map { "in group \($0), not \(group.name)" } ?? "in no group" }
        if group.secret != nil {
            guard let timestamp, group.verify(proof: proof, DiscoveryGroup.Claim(peerID: id, port: port, pin: pin,
                                                                                    addresses: signedAddresses, timestamp: timestamp)) else {
                return "wrong group secret (its proof does not match)"
            }
            let age = now - timestamp
            if abs(age) > Self.proofLifetime {
                return "its proof is \(abs(age)) s \(age > 0 ? "old" : "in the future") (a replay, or clocks apart by more than \(Self.proofLifetime) s)"
            }
            if reachableAddresses.isEmpty {
                return "advertised from \(addresses.joined(separator: ", ")), which its proof does not name (a replay from another host?)"
            }
        }
        if !group.pins.isEmpty {
            guard tls else { return "serves without TLS; the group's members are pinned" }
            guard let pin, let p = CertificatePin(.certificate, hex: pin), group.pins.contains(p) else {
                return "its certificate is not pinned (\(pin ?? "no pin"))"
            }
        }
        if tls && pin == nil { return "serves TLS without advertising its certificate pin" }
        return nil
    }
}
