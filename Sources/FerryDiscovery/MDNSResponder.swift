import FerryDNS
import FerryNet

/// The responder half of multicast DNS (RFC 6762) for DNS-SD advertisements (RFC 6763),
/// sans I/O: it is given the interfaces, received messages and the time, and answers with
/// the packets to send and when it next wants to run. It probes its names (§8.1, with the
/// simultaneous-probe tie-break of §8.2), renames on conflict (§9), announces (§8.3), answers
/// queries with known-answer suppression (§7.1) and interface-specific addresses (§15), and
/// says goodbye (§10.1).
public struct MDNSResponder: Sendable {
    /// What happened to an advertisement, for logs and the user.
    public enum Event: Sendable, Equatable {
        /// Probing found the name taken; the instance now goes by `to`.
        case renamed(from: String, to: String)
        /// The names are this host's; the records have been announced.
        case announced(instanceName: String)
    }

    private enum Phase: Sendable {
        case waiting(until: Double)
        case probing(sent: Int, next: Double)
        case announcing(sent: Int, next: Double)
        case announced
    }

    private struct Registration: Sendable {
        var advertisement: ServiceAdvertisement
        var service: DNSName
        var instance: DNSName
        var attempt = 1
        var phase: Phase
        /// TXT data announced before the last update: a copy of it looped back or still in
        /// flight is ours, not a conflict.
        var previousTXT: [[UInt8]]?
    }

    private let hostBase: String
    /// This host's mDNS name (`ferry-….local`), after any rename.
    public private(set) var hostName: DNSName
    private var hostAttempt = 1
    private var registrations: [Registration] = []
    private var interfaces: [MDNSInterface] = []
    private let ttls: MDNSTTLs
    private var random: SplitMix64
    private var delayed: [(at: Double, packet: MDNSPacket)] = []
    /// When each (interface, record) was last multicast, for the once-a-second limit (§6.2).
    private var lastMulticast: [UInt32: [DNSRecord: Double]] = [:]
    private var conflictTimes: [Double] = []
    /// Events since the last `takeEvents()`.
    private var events: [Event] = []

    /// The mDNS port: packets from another port are legacy queries, not responses.
    public let port: Int

    /// A responder for host label `hostLabel` (this host's name is `hostLabel.local`), on
    /// UDP `port` (5353 everywhere but in tests that keep to themselves).
    public init(hostLabel: String, ttls: MDNSTTLs = MDNSTTLs(), seed: UInt64, port: Int = 5353) {
        self.port = port
        hostBase = hostLabel
        hostName = (try? DNSName(labels: [hostLabel, "local"])) ?? DNSName(stringLiteral: "ferry.local")
        self.ttls = ttls
        random = SplitMix64(seed: seed)
    }

    /// The instance names currently used (after renames), in registration order.
    public var instanceNames: [String] { registrations.map { MDNSNames.firstLabel($0.instance) } }

    /// Whether every advertisement has finished probing.
    public var isAnnounced: Bool {
        registrations.allSatisfy { if case .probing = $0.phase { false } else if case .waiting = $0.phase { false } else { true } }
    }

    /// Starts advertising `advertisement`: probing begins after a random 0-250 ms (§8.1).
    public mutating func register(_ advertisement: ServiceAdvertisement, now: Double) {
        guard let service = MDNSNames.service(advertisement.serviceType),
              let instance = MDNSNames.instance(advertisement.instanceName, of: service) else { return }
        registrations.append(Registration(advertisement: advertisement, service: service, instance: instance,
                                          phase: .waiting(until: now + jitter(0, 0.25))))
    }

    /// Replaces the TXT pairs of the advertisement of `serviceType` and announces them.
    public mutating func updateTXT(_ txt: [(key: String, value: String?)], serviceType: String, now: Double) {
        for i in registrations.indices where registrations[i].advertisement.serviceType == serviceType {
            registrations[i].previousTXT = DNSTXT.encode(registrations[i].advertisement.txt)
            registrations[i].advertisement.txt = txt
            if case .announced = registrations[i].phase { registrations[i].phase = .announcing(sent: 0, next: now) }
        }
    }

    /// The interfaces to answer on. New or changed interfaces get the announcements again.
    public mutating func setInterfaces(_ new: [MDNSInterface], now: Double) {
        let changed = new.contains { n in !interfaces.contains(n) }
        interfaces = new
        let live = Set(new.map(\.index))
        lastMulticast = lastMulticast.filter { live.contains($0.key) }
        guard changed else { return }
        for i in registrations.indices {
            if case .announced = registrations[i].phase { registrations[i].phase = .announcing(sent: 0, next: now) }
        }
    }

    /// Returns and clears what happened since the last call.
    public mutating func takeEvents() -> [Event] {
        defer { events.removeAll() }
        return events
    }

    /// The earliest time `tick` has work to do (nil: only a message can give it work).
    public var nextDeadline: Double? {
        var t = delayed.map(\.at).min()
        for r in registrations {
            let d: Double?
            switch r.phase {
            case .waiting(let until): d = until
            case .probing(_, let next), .announcing(_, let next): d = next
            case .announced: d = nil
            }
            if let d { t = min(t ?? d, d) }
        }
        return t
    }

    /// Sends what is due: probes, announcements, delayed answers.
    public mutating func tick(now: Double) -> [MDNSPacket] {
        var out: [MDNSPacket] = []
        let due = delayed.filter { $0.at <= now }
        delayed.removeAll { $0.at <= now }
        out += due.map(\.packet)
        for i in registrations.indices {
            switch registrations[i].phase {
            case .waiting(let until) where until <= now:
                registrations[i].phase = .probing(sent: 0, next: now)
                out += probeIfDue(i, now: now)
            case .probing:
                out += probeIfDue(i, now: now)
            case .announcing(let sent, let next) where next <= now:
                let packets = announcement(registrations[i], ttlZero: false)
                for p in packets { noteMulticast(p, now: now) }
                out += packets
                // Two announcements a second apart (§8.3).
                registrations[i].phase = sent + 1 >= 2 ? .announced : .announcing(sent: sent + 1, next: now + 1)
            default:
                break
            }
        }
        return out
    }

    /// Goodbye packets (every record with TTL 0, §10.1) for every interface; the responder
    /// forgets its advertisements.
    public mutating func goodbye() -> [MDNSPacket] {
        let out = registrations.filter { if case .waiting = $0.phase { false } else if case .probing = $0.phase { false } else { true } }
            .flatMap { announcement($0, ttlZero: true) }
        registrations.removeAll()
        delayed.removeAll()
        return out
    }

    /// Takes a received message: answers queries, defends and tie-breaks probes, and notices
    /// conflicts in responses. Returns what to send now (delayed answers come from `tick`).
    public mutating func handle(_ m: DNSMessage, from source: SocketAddress, interface: UInt32, now: Double) -> [MDNSPacket] {
        guard interfaces.contains(where: { $0.index == interface }) else { return [] }
        if m.isResponse {
            // §11: responses not from port 5353 are not mDNS responses.
            if source.port == port { noticeConflicts(m.answers + m.additionals, now: now) }
            return []
        }
        if !m.authorities.isEmpty { tieBreak(m, now: now) }
        return answer(m, from: source, interface: interface, now: now)
    }

    // MARK: - Records

    private func address(records iface: MDNSInterface, ttl: UInt32, flush: Bool) -> [DNSRecord] {
        iface.ipv4.map { DNSRecord(name: hostName, data: .a($0), ttl: ttl, cacheFlush: flush) }
            + iface.ipv6.map { DNSRecord(name: hostName, data: .aaaa($0), ttl: ttl, cacheFlush: flush) }
    }

    private func srv(_ r: Registration, ttl: UInt32? = nil, flush: Bool = true) -> DNSRecord {
        DNSRecord(name: r.instance, data: .srv(priority: 0, weight: 0, port: r.advertisement.port, target: hostName),
                  ttl: ttl ?? ttls.host, cacheFlush: flush)
    }

    private func txt(_ r: Registration, ttl: UInt32? = nil, flush: Bool = true) -> DNSRecord {
        DNSRecord(name: r.instance, data: .txt(DNSTXT.encode(r.advertisement.txt)), ttl: ttl ?? ttls.other, cacheFlush: flush)
    }

    private func ptr(_ r: Registration, ttl: UInt32? = nil) -> DNSRecord {
        DNSRecord(name: r.service, data: .ptr(r.instance), ttl: ttl ?? ttls.other)
    }

    private func typePTR(_ r: Registration, ttl: UInt32? = nil) -> DNSRecord {
        DNSRecord(name: MDNSNames.serviceTypes, data: .ptr(r.service), ttl: ttl ?? ttls.other)
    }

    private func nsecs(_ r: Registration, _ iface: MDNSInterface) -> [DNSRecord] {
        var hostTypes: Set<DNSType> = []
        if !iface.ipv4.isEmpty { hostTypes.insert(.a) }
        if !iface.ipv6.isEmpty { hostTypes.insert(.aaaa) }
        return [DNSRecord(name: r.instance, data: .nsec(next: r.instance, types: [.srv, .txt]), ttl: ttls.host, cacheFlush: true),
                DNSRecord(name: hostName, data: .nsec(next: hostName, types: hostTypes), ttl: ttls.host, cacheFlush: true)]
    }

    /// Every record of `r` on `iface` (without NSEC).
    private func records(_ r: Registration, _ iface: MDNSInterface) -> [DNSRecord] {
        [ptr(r), typePTR(r), srv(r), txt(r)] + address(records: iface, ttl: ttls.host, flush: true)
    }

    private func announcement(_ r: Registration, ttlZero: Bool) -> [MDNSPacket] {
        interfaces.map { iface in
            var m = DNSMessage()
            m.isResponse = true
            m.isAuthoritative = true
            if ttlZero {
                m.answers = records(r, iface).map { var x = $0; x.ttl = 0; return x }
            } else {
                m.answers = records(r, iface)
                m.additionals = nsecs(r, iface)
            }
            return MDNSPacket(message: m, interfaceIndex: iface.index, destination: .multicast)
        }
    }

    // MARK: - Probing

    private mutating func probeIfDue(_ i: Int, now: Double) -> [MDNSPacket] {
        guard case .probing(let sent, let next) = registrations[i].phase, next <= now else { return [] }
        if sent >= 3 {
            // Three unanswered probes: the names are ours; the first announcement goes now.
            events.append(.announced(instanceName: MDNSNames.firstLabel(registrations[i].instance)))
            registrations[i].phase = .announcing(sent: 1, next: now + 1)
            let out = announcement(registrations[i], ttlZero: false)
            for p in out { noteMulticast(p, now: now) }
            return out
        }
        let r = registrations[i]
        registrations[i].phase = .probing(sent: sent + 1, next: now + 0.25)
        return interfaces.map { iface in
            var m = DNSMessage()
            m.questions = [DNSQuestion(name: r.instance, type: .any, unicastResponse: sent == 0),
                           DNSQuestion(name: hostName, type: .any, unicastResponse: sent == 0)]
            m.authorities = probeRecords(r, iface)
            return MDNSPacket(message: m, interfaceIndex: iface.index, destination: .multicast)
        }
    }

    /// The records a probe proposes (no cache-flush bit outside responses, §10.2).
    private func probeRecords(_ r: Registration, _ iface: MDNSInterface) -> [DNSRecord] {
        [srv(r, flush: false), txt(r, flush: false)] + address(records: iface, ttl: ttls.host, flush: false)
    }

    /// §8.2: two hosts probing for the same name at once compare their proposed records;
    /// the lexicographically earlier set defers for a second and probes again.
    private mutating func tieBreak(_ m: DNSMessage, now: Double) {
        for i in registrations.indices {
            guard case .probing = registrations[i].phase else { continue }
            let r = registrations[i]
            for name in [r.instance, hostName] where m.questions.contains(where: { $0.name == name }) {
                let theirs = m.authorities.filter { $0.name == name }
                guard !theirs.isEmpty else { continue }
                let ours = interfaces.flatMap { probeRecords(r, $0) }.filter { $0.name == name }
                let theirSet = Set(theirs.map { Self.sortKey($0) })
                let ourSet = Set(ours.map { Self.sortKey($0) })
                // Our own probe looped back, or an identical proposal.
                if theirSet.isSubset(of: ourSet) { continue }
                if Self.precedes(ours, theirs) {
                    registrations[i].phase = .waiting(until: now + 1)
                }
            }
        }
    }

    private static func sortKey(_ r: DNSRecord) -> String { "\(r.recordClass & 0x7fff)/\(r.type.rawValue)/\(r.data)" }

    private static func precedes(_ a: [DNSRecord], _ b: [DNSRecord]) -> Bool {
        let x = a.map(sortKey).sorted(), y = b.map(sortKey).sorted()
        for (p, q) in zip(x, y) where p != q { return p < q }
        return x.count < y.count
    }

    /// A response that claims one of our unique names with other data is a conflict (§9):
    /// the name is given up for the next (`Name (2)`, `host-2`) and probing starts again.
    private mutating func noticeConflicts(_ received: [DNSRecord], now: Double) {
        let ours = Set(interfaces.flatMap { iface in registrations.flatMap { records($0, iface) } }.map(Self.identity))
        let allAddresses = Set(interfaces.flatMap { $0.ipv4 + $0.ipv6 })
        var hostConflict = false
        for rec in received where rec.ttl > 0 && !ours.contains(Self.identity(rec)) {
            if rec.name == hostName {
                switch rec.data {
                case .a(let b), .aaaa(let b): if !allAddresses.contains(b) { hostConflict = true }
                default: break
                }
                continue
            }
            for i in registrations.indices where rec.name == registrations[i].instance {
                if case .txt(let t) = rec.data, t == registrations[i].previousTXT { continue }
                guard rec.type == .srv || rec.type == .txt else { continue }
                rename(i, now: now)
            }
        }
        if hostConflict {
            hostAttempt += 1
            hostName = (try? DNSName(labels: ["\(hostBase)-\(hostAttempt)", "local"])) ?? hostName
            for i in registrations.indices { restartProbing(i, now: now) }
        }
    }

    private static func identity(_ r: DNSRecord) -> String { "\(r.name)/\(r.type.rawValue)/\(r.data)" }

    private mutating func rename(_ i: Int, now: Double) {
        let old = MDNSNames.firstLabel(registrations[i].instance)
        registrations[i].attempt += 1
        let new = MDNSNames.renamed(registrations[i].advertisement.instanceName, attempt: registrations[i].attempt)
        guard let name = MDNSNames.instance(new, of: registrations[i].service) else { return }
        registrations[i].instance = name
        events.append(.renamed(from: old, to: new))
        restartProbing(i, now: now)
    }

    /// §8.1: after 15 conflicts within 10 s, wait 5 s before probing again.
    private mutating func restartProbing(_ i: Int, now: Double) {
        conflictTimes = conflictTimes.filter { $0 > now - 10 } + [now]
        let wait = conflictTimes.count >= 15 ? 5 : jitter(0, 0.25)
        registrations[i].phase = .waiting(until: now + wait)
    }

    // MARK: - Answering

    private mutating func answer(_ m: DNSMessage, from source: SocketAddress, interface: UInt32, now: Double) -> [MDNSPacket] {
        guard let iface = interfaces.first(where: { $0.index == interface }) else { return [] }
        let legacy = source.port != port
        var answers: [DNSRecord] = []
        var additionals: [DNSRecord] = []
        var unicastOnly = true
        var defending = false
        for q in m.questions {
            var matched: [DNSRecord] = []
            for r in registrations {
                switch r.phase { case .waiting, .probing: continue; default: break }
                let all = records(r, iface)
                let hits = all.filter { rec in
                    rec.name == q.name && (q.type == .any || q.type == rec.type)
                }
                matched += hits
                if !hits.isEmpty && !m.authorities.isEmpty { defending = true }
                // RFC 6763 §12: a PTR answer brings its SRV, TXT and addresses; an SRV its addresses.
                if hits.contains(where: { $0.type == .ptr && $0.name == r.service }) {
                    additionals += [srv(r), txt(r)] + address(records: iface, ttl: ttls.host, flush: true) + nsecs(r, iface)
                } else if hits.contains(where: { $0.type == .srv }) {
                    additionals += address(records: iface, ttl: ttls.host, flush: true) + nsecs(r, iface).suffix(1)
                }
            }
            if !matched.isEmpty && !q.unicastResponse { unicastOnly = false }
            answers += matched
        }
        // §7.1: leave out what the querier already knows with at least half its TTL left.
        let known = m.answers
        func isKnown(_ rec: DNSRecord) -> Bool {
            known.contains { $0.name == rec.name && $0.data == rec.data && $0.ttl >= rec.ttl / 2 }
        }
        answers = unique(answers.filter { !isKnown($0) })
        additionals = unique(additionals.filter { a in !isKnown(a) && !answers.contains(a) })
        guard !answers.isEmpty else { return [] }

        var reply = DNSMessage()
        reply.isResponse = true
        reply.isAuthoritative = true
        if legacy {
            // §6.7: a one-shot resolver gets its ID and question back, short TTLs and no
            // cache-flush bits, by unicast.
            reply.id = m.id
            reply.questions = m.questions
            reply.answers = answers.map { Self.legacy($0) }
            reply.additionals = additionals.map { Self.legacy($0) }
            return [MDNSPacket(message: reply, interfaceIndex: interface, destination: .unicast(source))]
        }
        if unicastOnly && !defending {
            reply.answers = answers
            reply.additionals = additionals
            return [MDNSPacket(message: reply, interfaceIndex: interface, destination: .unicast(source))]
        }
        // §6.2: a record is multicast at most once a second on an interface (a quarter second
        // when defending a name against a probe).
        let limit = defending ? 0.25 : 1.0
        let recent = lastMulticast[interface] ?? [:]
        answers = answers.filter { (recent[$0] ?? -.infinity) <= now - limit }
        guard !answers.isEmpty else { return [] }
        reply.answers = answers
        reply.additionals = additionals
        let packet = MDNSPacket(message: reply, interfaceIndex: interface, destination: .multicast)
        noteMulticast(packet, now: now)
        // §6: answers with shared records wait 20-120 ms, so that several responders do not
        // all answer at once; unique records go at once.
        if answers.contains(where: { !$0.cacheFlush }) && !defending {
            delayed.append((now + jitter(0.02, 0.12), packet))
            return []
        }
        return [packet]
    }

    private static func legacy(_ r: DNSRecord) -> DNSRecord {
        var x = r
        x.cacheFlush = false
        x.ttl = min(x.ttl, 10)
        return x
    }

    private func unique(_ records: [DNSRecord]) -> [DNSRecord] {
        var seen = Set<DNSRecord>()
        return records.filter { seen.insert($0).inserted }
    }

    private mutating func noteMulticast(_ p: MDNSPacket, now: Double) {
        for r in p.message.answers { lastMulticast[p.interfaceIndex, default: [:]][r] = now }
    }

    private mutating func jitter(_ low: Double, _ high: Double) -> Double {
        Double.random(in: low..<high, using: &random)
    }
}
