import ArgumentParser
import FerryDiscovery
import FerryNet
import FerryServer
import FoundationEssentials
import Glibc

/// `ferry serve`'s discovery flags: advertising on the LAN (on by default), joining a group
/// of peers found there, and static peers for networks without multicast (docs/daemon.md,
/// "Discovery").
struct DiscoveryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Replicate with every member of this group found on the LAN (DNS-SD over multicast DNS), for the databases both serve. Needs --group-secret.",
                               valueName: "group"))
    var discover: String?
    @Option(help: ArgumentHelp("The group's shared secret: members authenticate to each other with credentials derived from it, and a host without it is never trusted.",
                               valueName: "secret"))
    var groupSecret: String?
    @Option(help: ArgumentHelp("Read the group's secret from this file (first line).", valueName: "file"))
    var groupSecretFile: String?
    @Option(help: ArgumentHelp("The name this peer is advertised under (default: the host name; renamed \"NAME (2)\" if taken).", valueName: "name"))
    var advertiseName: String?
    @Flag(help: "Do not advertise this peer on the LAN.") var noAdvertise = false
    @Option(help: ArgumentHelp("The TTL of the advertised host records: how long a peer that vanished without a goodbye stays listed (default 120).",
                               valueName: "seconds"))
    var advertiseTtl: UInt32?
    @Option(name: .customLong("peer"), help: ArgumentHelp(
        "A static peer (ws://HOST:PORT, wss://, http://, https://; user:password@ optional): replicated with like a discovered member, for every database both serve; repeatable.",
        valueName: "url"))
    var staticPeers: [String] = []
    @Option(help: ArgumentHelp("Static peers, one URL per line (# starts a comment).", valueName: "file"))
    var peersFile: String?
    @Option(name: .customLong("discovery-interface"), help: ArgumentHelp(
        "Advertise and browse on this interface; repeatable (default: the interface of --host; every one for 0.0.0.0; lo for 127.0.0.1).",
        valueName: "name"))
    var interfaces: [String] = []

    func validate() throws {
        if groupSecret != nil && groupSecretFile != nil { throw ValidationError("--group-secret and --group-secret-file exclude each other") }
        if let discover, !DiscoveryGroup.isValidName(discover) {
            throw ValidationError("--discover \(discover): a group name is 1-63 letters, digits, '.', '_' or '-'")
        }
        if discover != nil && groupSecret == nil && groupSecretFile == nil {
            throw ValidationError("--discover needs --group-secret (or --group-secret-file): discovery never lets a peer in without credentials")
        }
    }

    /// The coordinator's configuration: nil when the daemon neither advertises nor has peers.
    func configuration(pins: [CertificatePin]) throws -> PeerCoordinator.Configuration? {
        var peers = staticPeers
        if let peersFile {
            guard let text = try? String(contentsOfFile: peersFile, encoding: .utf8) else { throw ValidationError("--peers-file \(peersFile): cannot read it") }
            peers += text.split(whereSeparator: \.isNewline).map { $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }
                .map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        }
        for p in peers where PeerCoordinator.isValidStaticPeer(p) == false {
            throw ValidationError("--peer \(p): expected ws://HOST:PORT (or wss://, http://, https://)")
        }
        guard !noAdvertise || discover != nil || !peers.isEmpty else { return nil }
        var c = PeerCoordinator.Configuration(instanceName: advertiseName ?? Self.hostName())
        c.advertise = !noAdvertise
        c.staticPeers = peers
        if !interfaces.isEmpty { c.interfaces = interfaces }
        if let advertiseTtl { c.ttls.host = advertiseTtl }
        var secret = groupSecret
        if let groupSecretFile {
            guard let text = try? String(contentsOfFile: groupSecretFile, encoding: .utf8),
                  let line = text.split(whereSeparator: \.isNewline).first, !line.isEmpty else {
                throw ValidationError("--group-secret-file \(groupSecretFile): cannot read a secret from it")
            }
            secret = String(line)
        }
        if let discover {
            c.group = DiscoveryGroup(name: discover, secret: secret, pins: pins)
            c.discover = true
        } else if let secret {
            // Static peers without discovery still use the group's credentials.
            c.group = DiscoveryGroup(name: "static", secret: secret, pins: pins)
        }
        if let problem = c.group?.validate() { throw ValidationError(problem) }
        return c
    }

    static func hostName() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        guard gethostname(&buf, buf.count) == 0 else { return "ferry" }
        let name = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // The short name: "molly.example.com" is advertised as "molly".
        return String(name.split(separator: ".").first ?? "ferry").prefix(63).description
    }
}
