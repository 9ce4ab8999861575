import FerryDNS
import FerryNet

/// The querier half of multicast DNS (RFC 6762) for one DNS-SD service type (RFC 6763),
/// sans I/O: continuous querying with doubling intervals (§5.2) and known answers (§7.1), a
/// record cache honouring TTLs, cache-flush (§10.2) and goodbyes (§10.1), cache maintenance
/// queries at 80-95 % of a TTL (§5.2), resolution of instances to SRV, TXT and addresses, and
/// reconfirmation of an instance that stopped answering (§10.4). It reports instances as
/// `DiscoveryEvent`s.
///
/// One deliberate difference from §10.1: a goodbye makes the instance *lost* at once (the
/// record itself stays a second, as the RFC asks, and an answer in that second brings the
/// instance back), so a replicator stops talking to a peer that is leaving without waiting.
public struct MDNSBrowser: Sendable {
    private struct Key: Hashable, Sendable {
        var name: DNSName
        var type: DNSType
        var data: DNSRecordData
    }

    private struct Entry: Sendable {
        var record: DNSRecord
        var received: Double
        var expires: Double
        var refreshes = 0
        var interface: UInt32
        var goodbye = false
    }

    /// The service type's name, e.g. `_ferry._tcp.local`.
    public let service: DNSName
    /// The most records kept; more are dropped (a flood on the link cannot grow memory).
    public let maxCacheEntries: Int
    private var cache: [Key: Entry] = [:]
    private var reported: [DNSName: DiscoveredService] = [:]
    private var interfaces: [MDNSInterface] = []
    private var nextQuery: Double?
    private var interval = 1.0
    private var asked: [DNSName: (last: Double, count: Int)] = [:]
    private var reconfirming: [DNSName: (since: Double, deadline: Double, nextAsk: Double)] = [:]
    private var random: SplitMix64
    private var events: [DiscoveryEvent] = []

    /// The mDNS port: responses from another port are not mDNS responses (RFC 6762 §11).
    public let port: Int

    /// A browser of `serviceType` (`_ferry._tcp`) on UDP `port`; nil when the type is not a
    /// valid name.
    public init?(serviceType: String, seed: UInt64, maxCacheEntries: Int = 4096, port: Int = 5353) {
        self.port = port
        guard let s = MDNSNames.service(serviceType) else { return nil }
        service = s
        self.maxCacheEntries = maxCacheEntries
        random = SplitMix64(seed: seed)
    }

    /// The instances currently resolved.
    public var services: [DiscoveredService] { reported.values.sorted { $0.name < $1.name } }

    /// Returns and clears the events since the last call.
    public mutating func takeEvents() -> [DiscoveryEvent] {
        defer { events.removeAll() }
        return events
    }

    /// The interfaces to browse on. A new one gets a query at once; records learned on one
    /// that is gone are dropped.
    public mutating func setInterfaces(_ new: [MDNSInterface], now: Double) {
        let old = Set(interfaces.map(\.index))
        let live = Set(new.map(\.index))
        interfaces = new
        if !live.isSubset(of: old) {
            nextQuery = now + Double.random(in: 0.02..<0.12, using: &random)
            interval = 1
        }
        if !old.isSubset(of: live) {
            cache = cache.filter { live.contains($0.value.interface) }
            evaluate(now: now, reason: "interface gone")
        }
    }

    /// Asks again for an instance a client could not reach (§10.4): unless its host answers
    /// within 5 seconds, the instance is flushed and reported lost.
    public mutating func reconfirm(_ instance: DNSName, now: Double) {
        guard reported[instance] != nil, reconfirming[instance] == nil else { return }
        reconfirming[instance] = (since: now, deadline: now + 5, nextAsk: now)
    }

    /// Takes a received message: responses update the cache and may report instances.
    public mutating func handle(_ m: DNSMessage, from source: SocketAddress, interface: UInt32, now: Double) {
        guard m.isResponse, source.port == port, interfaces.contains(where: { $0.index == interface }) else { return }
        let records = m.answers + m.additionals
        // Instances first, so their hosts' addresses in the same packet are known to matter.
        let ordered = records.filter { isInstanceRecord($0) } + records.filter { !isInstanceRecord($0) }
        let keysHere = Set(records.map { Key(name: $0.name, type: $0.type, data: $0.data) })
        for rec in ordered where isRelevant(rec) {
            let key = Key(name: rec.name, type: rec.type, data: rec.data)
            if rec.ttl == 0 {
                if var e = cache[key] {
                    e.expires = min(e.expires, now + 1)
                    e.goodbye = true
                    cache[key] = e
                }
                continue
            }
            if rec.cacheFlush {
                // §10.2: other data for this name and type, older than a second, goes in a second.
                let stale = cache.filter { $0.key.name == rec.name && $0.key.type == rec.type && !keysHere.contains($0.key) && $0.value.received < now - 1 }
                for (k, e) in stale { cache[k]?.expires = min(e.expires, now + 1) }
            }
            if cache[key] == nil && cache.count >= maxCacheEntries { continue }
            cache[key] = Entry(record: rec, received: now, expires: now + Double(rec.ttl), interface: interface)
            if rec.type == .srv, reconfirming[rec.name] != nil { reconfirming[rec.name] = nil }
        }
        evaluate(now: now, reason: "goodbye")
    }

    /// The earliest time `tick` has work to do.
    public var nextDeadline: Double? {
        var t = nextQuery
        func take(_ d: Double) { t = min(t ?? d, d) }
        for e in cache.values {
            take(e.expires)
            if e.refreshes < 4 && isMaintained(e.record) { take(refreshTime(e)) }
        }
        for (name, a) in asked where needsResolving(name) { take(a.last + backoff(a.count)) }
        for r in reconfirming.values { take(min(r.deadline, r.nextAsk)) }
        return t
    }

    /// Expires records and sends what is due: the periodic query, maintenance queries,
    /// resolution and reconfirmation queries.
    public mutating func tick(now: Double) -> [MDNSPacket] {
        let expired = cache.filter { $0.value.expires <= now }.map(\.key)
        for k in expired { cache[k] = nil }
        var questions: [DNSQuestion] = []
        var knownAnswers: [DNSRecord] = []
        if let q = nextQuery, q <= now {
            questions.append(DNSQuestion(name: service, type: .ptr))
            // §7.1: PTRs we hold with more than half their TTL left are listed, so their
            // owners need not answer.
            knownAnswers = cache.values.filter { $0.record.name == service && $0.record.type == .ptr && !$0.goodbye
                && ($0.expires - now) > Double($0.record.ttl) / 2 }
                .map { var r = $0.record; r.ttl = UInt32(max(0, $0.expires - now)); return r }
            // §5.2: intervals double up to an hour.
            nextQuery = now + interval
            interval = min(interval * 2, 3600)
        }
        for (k, e) in cache where e.refreshes < 4 && isMaintained(e.record) && refreshTime(e) <= now {
            cache[k]?.refreshes += 1
            questions.append(DNSQuestion(name: k.name, type: k.type))
        }
        for (name, since) in reconfirming {
            if since.deadline <= now {
                reconfirming[name] = nil
                if !cache.contains(where: { $0.key.name == name && $0.key.type == .srv && $0.value.received > since.since }) {
                    for (k, _) in cache where k.name == name { cache[k] = nil }
                }
            } else if since.nextAsk <= now {
                reconfirming[name]?.nextAsk = now + 1
                questions.append(DNSQuestion(name: name, type: .srv))
            }
        }
        evaluate(now: now, reason: "expired")
        questions += resolutionQuestions(now: now)
        var seen = Set<DNSQuestion>()
        questions = questions.filter { seen.insert($0).inserted }
        guard !questions.isEmpty else { return [] }
        var m = DNSMessage()
        m.questions = questions
        m.answers = knownAnswers
        return interfaces.map { MDNSPacket(message: m, interfaceIndex: $0.index, destination: .multicast) }
    }

    // MARK: - Cache

    private func isInstanceRecord(_ r: DNSRecord) -> Bool {
        (r.type == .ptr && r.name == service) || ((r.type == .srv || r.type == .txt) && isInstanceName(r.name))
    }

    private func isInstanceName(_ name: DNSName) -> Bool {
        name.labels.count == service.labels.count + 1 && name.hasSuffix(service)
    }

    /// Only what this browser uses is cached: its PTRs, its instances' SRV and TXT, and the
    /// addresses of their hosts.
    private func isRelevant(_ r: DNSRecord) -> Bool {
        if isInstanceRecord(r) { return true }
        guard r.type == .a || r.type == .aaaa else { return false }
        return cache.values.contains { if case .srv(_, _, _, let target) = $0.record.data { target == r.name } else { false } }
    }

    private func isMaintained(_ r: DNSRecord) -> Bool { r.type != .nsec }

    /// §5.2: a record still wanted is asked for at 80, 85, 90 and 95 % of its TTL (plus 0-2 %).
    private func refreshTime(_ e: Entry) -> Double {
        e.received + Double(e.record.ttl) * (0.80 + 0.05 * Double(e.refreshes) + 0.01)
    }

    private func backoff(_ count: Int) -> Double { min(Double(1 << min(count, 6)), 60) }

    private func needsResolving(_ name: DNSName) -> Bool {
        if isInstanceName(name) {
            return !cache.contains { $0.key.name == name && $0.key.type == .srv && !$0.value.goodbye }
                || !cache.contains { $0.key.name == name && $0.key.type == .txt && !$0.value.goodbye }
        }
        return !cache.contains { $0.key.name == name && ($0.key.type == .a || $0.key.type == .aaaa) && !$0.value.goodbye }
    }

    /// Questions for instances without SRV/TXT and hosts without addresses, each asked again
    /// after 2, 4, … up to 60 s while it stays unresolved.
    private mutating func resolutionQuestions(now: Double) -> [DNSQuestion] {
        var wanted: [(DNSName, [DNSType])] = []
        for e in cache.values where e.record.name == service && !e.goodbye {
            if case .ptr(let instance) = e.record.data, needsResolving(instance) { wanted.append((instance, [.srv, .txt])) }
        }
        for e in cache.values where !e.goodbye {
            if case .srv(_, _, _, let target) = e.record.data, needsResolving(target) { wanted.append((target, [.a, .aaaa])) }
        }
        asked = asked.filter { needsResolving($0.key) }
        var out: [DNSQuestion] = []
        for (name, types) in wanted {
            if let a = asked[name], now < a.last + backoff(a.count) { continue }
            asked[name] = (now, (asked[name]?.count ?? 0) + 1)
            out += types.map { DNSQuestion(name: name, type: $0) }
        }
        return out
    }

    // MARK: - Instances

    private func resolve(_ instance: DNSName) -> DiscoveredService? {
        let live = cache.values.filter { !$0.goodbye }
        guard let srv = live.filter({ $0.record.name == instance && $0.record.type == .srv }).max(by: { $0.received < $1.received }),
              case .srv(_, _, let port, let target) = srv.record.data else { return nil }
        let txt = live.filter { $0.record.name == instance && $0.record.type == .txt }.max { $0.received < $1.received }
        var strings: [[UInt8]] = []
        if let txt, case .txt(let s) = txt.record.data { strings = s }
        var v4: [String] = [], v6: [String] = []
        var seenOn: Set<UInt32> = [srv.interface]
        for e in live where e.record.name == target {
            switch e.record.data {
            case .a(let b): if let a = SocketAddress(addressBytes: b, port: 0) { v4.append(a.host); seenOn.insert(e.interface) }
            case .aaaa(let b): if let a = SocketAddress(addressBytes: b, port: 0) { v6.append(a.host); seenOn.insert(e.interface) }
            default: break
            }
        }
        guard !(v4.isEmpty && v6.isEmpty) else { return nil }
        return DiscoveredService(name: MDNSNames.firstLabel(instance), fullName: instance, hostName: target, port: port,
                                 addresses: v4.sorted() + v6.sorted(), txt: DNSTXT.decode(strings), interfaces: seenOn)
    }

    private mutating func evaluate(now: Double, reason: String) {
        var current: [DNSName: DiscoveredService] = [:]
        for e in cache.values where e.record.name == service && e.record.type == .ptr && !e.goodbye && e.expires > now {
            if case .ptr(let instance) = e.record.data, isInstanceName(instance), let s = resolve(instance) { current[instance] = s }
        }
        for (name, _) in reported where current[name] == nil {
            let saidGoodbye = cache.contains { $0.key.name == service && $0.key.data == .ptr(name) && $0.value.goodbye }
                || cache.contains { $0.key.name == name && $0.key.type == .srv && $0.value.goodbye }
            events.append(.lost(name: name, reason: saidGoodbye ? "goodbye" : reason))
            reported[name] = nil
            reconfirming[name] = nil
        }
        for (name, s) in current.sorted(by: { $0.value.name < $1.value.name }) {
            if let old = reported[name] {
                if old.port != s.port || old.addresses != s.addresses || old.txt != s.txt || old.hostName != s.hostName {
                    events.append(.changed(s))
                }
            } else {
                events.append(.found(s))
            }
            reported[name] = s
        }
    }
}
