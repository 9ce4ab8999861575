import CFerrySystem
import FerryDNS
import FerryNet
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Multicast DNS on an event loop: the sockets (IPv4 and, where it exists, IPv6, port 5353),
/// group membership per interface, and a timer, driving an `MDNSResponder` (when it
/// advertises) and an `MDNSBrowser` (when it browses). The engines decide everything; this
/// only moves bytes, follows the interfaces (polled, so a Wi-Fi that comes and goes is
/// followed) and reports what the browser finds as an `AsyncStream`.
///
/// Malformed packets are dropped and counted (`Statistics.malformed`); nothing else happens.
///
/// Safety of `@unchecked Sendable`: every mutable property is touched only on `loop` (the
/// public methods hop there with `submit`/`execute`); `events` and its continuation are
/// thread-safe.
public final class MDNSAgent: @unchecked Sendable {
    /// What to advertise, what to browse, and where.
    public struct Configuration: Sendable {
        /// The interfaces to run on, by name; nil = every running, multicast-capable,
        /// non-loopback interface with an address.
        public var interfaces: [String]?
        /// The UDP port: 5353 (tests in namespaces use it too; another value only talks to itself).
        public var port = 5353
        /// This host's mDNS label (`label.local`, the SRV target).
        public var hostLabel: String
        /// The service to advertise, if any.
        public var advertisement: ServiceAdvertisement?
        /// The service type to browse (`_ferry._tcp`), if any.
        public var browse: String?
        /// The TTLs of advertised records.
        public var ttls = MDNSTTLs()
        /// How often the interfaces are looked at again.
        public var interfacePollInterval = 2.0
        /// Whether to run on IPv6 too (ff02::fb) when the machine has it.
        public var ipv6 = true

        /// A configuration for host label `hostLabel`; add an advertisement and/or a browse type.
        public init(hostLabel: String) { self.hostLabel = hostLabel }
    }

    /// Counters since start.
    public struct Statistics: Sendable, Equatable {
        /// Packets received and decoded.
        public var received = 0
        /// Packets dropped because they did not decode (bad lengths, pointer loops, oversized names…).
        public var malformed = 0
        /// Packets sent.
        public var sent = 0
        /// Packets the kernel refused (an interface going down) or too large to send.
        public var sendFailures = 0
    }

    private let group4: SocketAddress?
    private let group6: SocketAddress?

    /// The loop everything runs on.
    public let loop: EventLoop
    /// What the browser reports, in order. Finishes when the agent stops.
    public let events: AsyncStream<DiscoveryEvent>
    private let continuation: AsyncStream<DiscoveryEvent>.Continuation
    private let configuration: Configuration
    private let logger: Logger
    private var sockets: [MulticastSocket] = []
    private var responder: MDNSResponder?
    private var browser: MDNSBrowser?
    private var interfaces: [MDNSInterface] = []
    private var timer: TimerHandle?
    private var pollTimer: TimerHandle?
    private var stats = Statistics()
    private var stopped = false

    private init(configuration: Configuration, loop: EventLoop, logger: Logger) {
        self.configuration = configuration
        self.loop = loop
        self.logger = logger
        group4 = try? SocketAddress(ipAddress: "224.0.0.251", port: configuration.port)
        group6 = try? SocketAddress(ipAddress: "ff02::fb", port: configuration.port)
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }

    /// Opens the sockets, starts probing (when advertising) and querying (when browsing).
    /// Throws when the IPv4 socket cannot be had (port 5353 taken without SO_REUSEPORT, …).
    public static func start(_ configuration: Configuration, loop: EventLoop, logger: Logger) async throws -> MDNSAgent {
        let agent = MDNSAgent(configuration: configuration, loop: loop, logger: logger)
        var random: UInt64 = 0
        _ = ferry_random_bytes(&random, 8)
        let seed = random
        try await loop.submit { try agent.open(seed: seed) }
        return agent
    }

    private func open(seed: UInt64) throws {
        sockets.append(try MulticastSocket.open(family: AF_INET, port: configuration.port, loop: loop) { [weak self] d in
            self?.received(d)
        })
        if configuration.ipv6 {
            do {
                sockets.append(try MulticastSocket.open(family: AF_INET6, port: configuration.port, loop: loop) { [weak self] d in
                    self?.received(d)
                })
            } catch {
                logger.debug("mDNS: no IPv6 socket (\(error)); IPv4 only")
            }
        }
        if let ad = configuration.advertisement {
            var r = MDNSResponder(hostLabel: configuration.hostLabel, ttls: configuration.ttls, seed: seed, port: configuration.port)
            r.register(ad, now: Self.now())
            responder = r
        }
        if let type = configuration.browse {
            browser = MDNSBrowser(serviceType: type, seed: seed ^ 0x5bd1_e995, port: configuration.port)
        }
        pollInterfaces()
    }

    /// Sends goodbyes for what it advertised, closes the sockets and ends `events`.
    public func stop() async {
        _ = try? await loop.submit { self.stopOnLoop() }
    }

    private func stopOnLoop() {
        guard !stopped else { return }
        if responder != nil { send(responder?.goodbye() ?? []) }
        stopped = true
        if let timer { loop.cancel(timer) }
        if let pollTimer { loop.cancel(pollTimer) }
        for s in sockets { s.close() }
        sockets.removeAll()
        continuation.finish()
    }

    /// The instances the browser has resolved now.
    public func services() async -> [DiscoveredService] {
        (try? await loop.submit { self.browser?.services ?? [] }) ?? []
    }

    /// The advertised instance's name now (after any rename) and whether probing is done.
    public func advertisedName() async -> (name: String, announced: Bool)? {
        try? await loop.submit { self.responder.map { ($0.instanceNames.first ?? "", $0.isAnnounced) } }
    }

    /// The counters.
    public func statistics() async -> Statistics {
        (try? await loop.submit {
            var s = self.stats
            s.sendFailures += self.sockets.reduce(0) { $0 + $1.sendFailures }
            return s
        }) ?? Statistics()
    }

    /// Replaces the advertised TXT pairs and announces them.
    public func updateTXT(_ txt: [(key: String, value: String?)]) {
        _ = loop.execute {
            guard let type = self.configuration.advertisement?.serviceType else { return }
            self.responder?.updateTXT(txt, serviceType: type, now: Self.now())
            self.run()
        }
    }

    /// Asks the link again for an instance that could not be reached (RFC 6762 §10.4); it is
    /// reported lost unless its host answers within 5 seconds.
    public func reconfirm(_ instance: DNSName) {
        _ = loop.execute {
            self.browser?.reconfirm(instance, now: Self.now())
            self.run()
        }
    }

    // MARK: - On the loop

    private static func now() -> Double { Double(ferry_monotonic_ns()) / 1e9 }

    private func received(_ d: MulticastSocket.Datagram) {
        guard !stopped else { return }
        let m: DNSMessage
        do {
            m = try DNSMessage.decode(d.bytes)
        } catch {
            stats.malformed += 1
            logger.debug("mDNS: dropped a malformed packet from \(d.source): \(error)")
            return
        }
        stats.received += 1
        let now = Self.now()
        // A datagram reports the interface it came in on; one we do not run on is ignored.
        var out: [MDNSPacket] = []
        out += responder?.handle(m, from: d.source, interface: d.interfaceIndex, now: now) ?? []
        browser?.handle(m, from: d.source, interface: d.interfaceIndex, now: now)
        send(out)
        run()
    }

    /// Ticks both engines, sends, reports, and sets the timer for the next deadline.
    private func run() {
        guard !stopped else { return }
        let now = Self.now()
        var out: [MDNSPacket] = []
        out += responder?.tick(now: now) ?? []
        for e in responder?.takeEvents() ?? [] {
            switch e {
            case .renamed(let from, let to): logger.notice("mDNS: the name \"\(from)\" is taken on this network; advertising as \"\(to)\"")
            case .announced(let name): logger.info("mDNS: advertising \"\(name)\" (\(configuration.advertisement?.serviceType ?? ""))")
            }
        }
        out += browser?.tick(now: now) ?? []
        send(out)
        for e in browser?.takeEvents() ?? [] { continuation.yield(e) }
        if let timer { loop.cancel(timer) }
        let deadlines = [responder?.nextDeadline, browser?.nextDeadline].compactMap { $0 }
        if let next = deadlines.min() {
            timer = loop.schedule(after: max(0, next - now) + 0.001) { [weak self] in
                self?.timer = nil
                self?.run()
            }
        }
    }

    private func send(_ packets: [MDNSPacket]) {
        for p in packets {
            let bytes = p.message.encode()
            guard bytes.count <= 9000 else { stats.sendFailures += 1; continue }
            guard let iface = interfaces.first(where: { $0.index == p.interfaceIndex }) else { continue }
            for s in sockets {
                let destination: SocketAddress?
                switch p.destination {
                case .unicast(let a): destination = a.family == s.family ? a : nil
                case .multicast:
                    if s.family == AF_INET { destination = iface.ipv4.isEmpty ? nil : group4 } else { destination = iface.ipv6.isEmpty ? nil : group6 }
                }
                guard let destination else { continue }
                if s.send(bytes, to: destination, interfaceIndex: p.interfaceIndex) { stats.sent += 1 }
            }
        }
    }

    /// The interfaces an agent configured with `names` runs on: those named and running, or
    /// (nil) every running, multicast-capable, non-loopback interface with an address.
    public static func interfaces(named names: [String]?) -> [NetworkInterface] {
        let wanted = names.map(Set.init)
        return NetworkInterface.all().filter { i in
            if let wanted { return wanted.contains(i.name) && i.isRunning }
            return i.isRunning && i.supportsMulticast && !i.isLoopback && !(i.ipv4.isEmpty && i.ipv6.isEmpty)
        }
    }

    /// Follows the interfaces: joins the group on new ones, leaves gone ones, and tells the
    /// engines (which announce and query on the new ones).
    private func pollInterfaces() {
        guard !stopped else { return }
        let hasV6 = sockets.contains { $0.family == AF_INET6 }
        let found = Self.interfaces(named: configuration.interfaces).map {
            // IPv6 multicast has no route on the loopback interface: there it is IPv4 only.
            MDNSInterface(index: $0.index, name: $0.name, ipv4: $0.ipv4, ipv6: hasV6 && !$0.isLoopback ? $0.ipv6 : [])
        }
        if found != interfaces {
            let old = Set(interfaces.map(\.index)), new = Set(found.map(\.index))
            for s in sockets {
                guard let group = s.family == AF_INET ? group4 : group6 else { continue }
                for i in found where !old.contains(i.index) {
                    do { try s.setMembership(group: group, interfaceIndex: i.index, joined: true) } catch {
                        logger.debug("mDNS: cannot join \(group.host) on \(i.name): \(error)")
                    }
                }
                for i in interfaces where !new.contains(i.index) {
                    try? s.setMembership(group: group, interfaceIndex: i.index, joined: false)
                }
            }
            if found.map(\.name) != interfaces.map(\.name) {
                logger.info("mDNS: on \(found.isEmpty ? "no interface" : found.map(\.name).joined(separator: ", "))")
            }
            interfaces = found
            let now = Self.now()
            responder?.setInterfaces(found, now: now)
            browser?.setInterfaces(found, now: now)
            run()
        }
        pollTimer = loop.schedule(after: configuration.interfacePollInterval) { [weak self] in self?.pollInterfaces() }
    }
}
