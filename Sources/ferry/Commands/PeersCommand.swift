import ArgumentParser
import FerryDiscovery
import FerryNet
import FerryServer
import FerryStore
import FoundationEssentials
import Glibc
import Logging

/// `ferry peers`: lists the Ferry peers advertised on the LAN (DNS-SD over multicast DNS),
/// with their addresses, databases and certificate pins, and — given a group and its secret —
/// whether each would be trusted.
struct PeersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "List the Ferry peers advertised on the LAN.",
        discussion: """
        Browses for _ferry._tcp services for --timeout seconds and prints each peer found. With
        --group and --group-secret, says which peers are members (their advertisement carries
        the group's proof) and why the others are not trusted.

        Example:
          ferry peers --group lab --group-secret "$LAB_SECRET"
          ferry peers --json | jq '.[].addresses'
        """)

    @Option(help: ArgumentHelp("How long to listen, in seconds.", valueName: "seconds")) var timeout: Double = 3
    @Option(help: ArgumentHelp("Check membership of this group.", valueName: "group")) var group: String?
    @Option(help: ArgumentHelp("The group's shared secret.", valueName: "secret")) var groupSecret: String?
    @Option(help: ArgumentHelp("Members must serve TLS with one of these certificates (SHA-256, hex); repeatable.", valueName: "sha256"))
    var pin: [String] = []
    @Option(name: .customLong("interface"), help: ArgumentHelp("Browse on this interface; repeatable (default: every interface with multicast, and lo).", valueName: "name"))
    var interfaces: [String] = []
    @Flag(help: "Print JSON (an array of peers) instead of a table.") var json = false

    func validate() throws {
        if timeout <= 0 { throw ValidationError("--timeout must be positive") }
        if groupSecret != nil && group == nil { throw ValidationError("--group-secret needs --group") }
        for p in pin where CertificatePin(.certificate, hex: p) == nil { throw ValidationError("--pin \(p) is not a SHA-256 digest (64 hex digits)") }
    }

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = .warning
            return h
        }
        let loop = try EventLoop(name: "ferry-peers")
        defer { loop.shutdown() }
        var c = MDNSAgent.Configuration(hostLabel: "ferry-peers-\(getpid())")
        c.browse = PeerRecord.serviceType
        c.interfaces = interfaces.isEmpty
            ? NetworkInterface.all().filter { $0.isRunning && ($0.supportsMulticast || $0.isLoopback) }.map(\.name)
            : interfaces
        let agent: MDNSAgent
        do { agent = try await MDNSAgent.start(c, loop: loop, logger: Logger(label: "ferry.peers")) } catch {
            throw CommandFailure("cannot browse: \(error)")
        }
        try? await Task.sleep(for: .seconds(timeout))
        let services = await agent.services()
        await agent.stop()
        let groupConfig = group.map { DiscoveryGroup(name: $0, secret: groupSecret, pins: pin.compactMap { CertificatePin(.certificate, hex: $0) }) }
        let peers = services.compactMap { s -> PeerCoordinator.Peer? in
            guard let r = PeerRecord(s) else { return nil }
            return PeerCoordinator.Peer(source: "mdns", record: r, distrust: groupConfig.map { r.distrust(in: $0) } ?? "no --group given", replicating: [])
        }
        if json {
            let array = JSONValue.array(peers.map { p in
                var o = PeerCoordinator.json(p).objectValue ?? [:]
                o["replicating"] = nil
                return .object(o)
            })
            print(String(decoding: CanonicalJSON.encode(array), as: UTF8.self))
            return
        }
        guard !peers.isEmpty else {
            print("No Ferry peer answered within \(timeout) s.")
            return
        }
        var table = TextTable(columns: [.init(header: "NAME", flexible: true, minWidth: 8), .init(header: "ADDRESS"),
                                        .init(header: "DATABASES", priority: 2, flexible: true), .init(header: "GROUP", priority: 1),
                                        .init(header: "TLS PIN", priority: 3), .init(header: "TRUSTED", flexible: true, minWidth: 8)])
        table.rows = peers.map { p in
            let r = p.record
            let host = r.addresses.first.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "?"
            let cells = [r.name, "\(host):\(r.port)", r.databases?.joined(separator: ",") ?? "*", r.group ?? "-",
                         r.pin.map { String($0.prefix(16)) + "…" } ?? (r.tls ? "?" : "-"),
                         group == nil ? "-" : (p.distrust.map { "no: \($0)" } ?? "yes")]
            return cells.map { .text(StyledLine($0)) }
        }
        for line in table.lines(width: Terminal.size(of: 1)?.columns ?? 160) { print(line.rendered(color: false)) }
    }
}
