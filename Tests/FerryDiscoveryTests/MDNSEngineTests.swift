import FerryDNS
import FerryNet
import Testing
@testable import FerryDiscovery

/// The sans-I/O responder and browser, exchanging packets in memory on one simulated link:
/// every multicast packet reaches every engine (as IP_MULTICAST_LOOP does), time is a number
/// the test advances.
@Suite struct MDNSEngineTests {
    static let lo = MDNSInterface(index: 1, name: "lo", ipv4: [[10, 0, 0, 1]], ipv6: [])
    static let other = MDNSInterface(index: 1, name: "lo", ipv4: [[10, 0, 0, 2]], ipv6: [])
    static let source = try! SocketAddress(ipAddress: "10.0.0.1", port: 5353)

    static func ad(_ name: String, port: UInt16 = 4984, txt: [(key: String, value: String?)] = [("id", "a1"), ("dbs", "db")]) -> ServiceAdvertisement {
        ServiceAdvertisement(instanceName: name, serviceType: "_ferry._tcp", port: port, txt: txt)
    }

    /// A link of responders and browsers; `run(until:)` steps time in 10 ms and delivers.
    struct Link {
        var responders: [MDNSResponder] = []
        var browsers: [MDNSBrowser] = []
        var now = 0.0
        var delivered: [DNSMessage] = []

        mutating func deliver(_ packets: [MDNSPacket]) {
            for p in packets {
                // Through the codec, as on the wire.
                let bytes = p.message.encode()
                guard let m = try? DNSMessage.decode(bytes) else { Issue.record("undecodable packet"); continue }
                delivered.append(m)
                var more: [MDNSPacket] = []
                for i in responders.indices { more += responders[i].handle(m, from: MDNSEngineTests.source, interface: 1, now: now) }
                for i in browsers.indices { browsers[i].handle(m, from: MDNSEngineTests.source, interface: 1, now: now) }
                deliver(more)
            }
        }

        mutating func run(until end: Double) {
            while now < end {
                var out: [MDNSPacket] = []
                for i in responders.indices { out += responders[i].tick(now: now) }
                for i in browsers.indices { out += browsers[i].tick(now: now) }
                deliver(out)
                now += 0.01
            }
        }
    }

    /// A link with one responder advertising `name` (host `ferry-aaaa`) and one browser,
    /// run until the instance is announced and found.
    static func announced(_ name: String, ttls: MDNSTTLs = MDNSTTLs()) -> Link {
        var link = Link()
        var r = MDNSResponder(hostLabel: "ferry-aaaa", ttls: ttls, seed: 1)
        r.setInterfaces([Self.lo], now: 0)
        r.register(Self.ad(name), now: 0)
        var b = MDNSBrowser(serviceType: "_ferry._tcp", seed: 2)!
        b.setInterfaces([Self.lo], now: 0)
        link.responders = [r]
        link.browsers = [b]
        link.run(until: 3)
        return link
    }

    @Test func aBrowserFindsAnAdvertisedInstanceWithItsTXTAndSeesItsGoodbye() {
        var link = Self.announced("Molly's Mac")
        #expect(link.responders[0].isAnnounced)
        let events = link.browsers[0].takeEvents()
        guard case .found(let s) = events.first else { Issue.record("not found: \(events)"); return }
        #expect(s.name == "Molly's Mac")
        #expect(s.port == 4984)
        #expect(s.addresses == ["10.0.0.1"])
        #expect(s.value("id") == "a1" && s.value("dbs") == "db")
        #expect(s.hostName == DNSName(stringLiteral: "ferry-aaaa.local"))
        // Three probes (ANY questions with the proposed records in the authority section)
        // went out before the first announcement.
        let beforeAnnouncing = link.delivered.prefix { !$0.isResponse }
        #expect(beforeAnnouncing.filter { !$0.authorities.isEmpty }.count == 3)

        link.deliver(link.responders[0].goodbye())
        #expect(link.browsers[0].takeEvents() == [.lost(name: s.fullName, reason: "goodbye")])
    }

    @Test func aSecondHostWithTheSameNameIsRenamedByProbing() {
        var link = Link()
        var first = MDNSResponder(hostLabel: "ferry-aaaa", seed: 1)
        first.setInterfaces([Self.lo], now: 0)
        first.register(Self.ad("lab", port: 1), now: 0)
        link.responders = [first]
        link.run(until: 3)
        var second = MDNSResponder(hostLabel: "ferry-bbbb", seed: 3)
        second.setInterfaces([Self.other], now: link.now)
        second.register(Self.ad("lab", port: 2), now: link.now)
        link.responders.append(second)
        var b = MDNSBrowser(serviceType: "_ferry._tcp", seed: 2)!
        b.setInterfaces([Self.lo], now: link.now)
        link.browsers = [b]
        link.run(until: 8)
        #expect(link.responders[0].instanceNames == ["lab"])
        #expect(link.responders[1].instanceNames == ["lab (2)"])
        #expect(link.responders[1].takeEvents().contains(.renamed(from: "lab", to: "lab (2)")))
        #expect(Set(link.browsers[0].services.map(\.name)) == ["lab", "lab (2)"])
        #expect(Set(link.browsers[0].services.map(\.port)) == [1, 2])
    }

    @Test func knownAnswersAreNotRepeated() {
        var r = MDNSResponder(hostLabel: "ferry-aaaa", seed: 1)
        r.setInterfaces([Self.lo], now: 0)
        r.register(Self.ad("x"), now: 0)
        var t = 0.0
        while t < 3 { _ = r.tick(now: t); t += 0.05 }
        var q = DNSMessage()
        q.questions = [DNSQuestion(name: "_ferry._tcp.local", type: .ptr)]
        // Wait past the once-a-second limit, then ask: the PTR is answered after 20-120 ms,
        // with SRV, TXT and A in the additional section.
        t += 1.1
        _ = r.handle(q, from: Self.source, interface: 1, now: t)
        let answer = r.tick(now: t + 0.2)
        #expect(answer.count == 1)
        #expect(answer.first?.message.answers.map(\.type) == [.ptr])
        let additionalTypes = Set(answer.first?.message.additionals.map(\.type) ?? [])
        #expect(additionalTypes.isSuperset(of: [.srv, .txt, .a]))
        // The same question listing the PTR as known (TTL well above half) gets nothing.
        q.answers = answer.first?.message.answers ?? []
        t += 1.5
        #expect(r.handle(q, from: Self.source, interface: 1, now: t).isEmpty)
        #expect(r.tick(now: t + 0.2).isEmpty)
    }

    @Test func aLegacyUnicastQueryGetsItsIDAndShortTTLs() {
        var r = MDNSResponder(hostLabel: "ferry-aaaa", seed: 1)
        r.setInterfaces([Self.lo], now: 0)
        r.register(Self.ad("x"), now: 0)
        var t = 0.0
        while t < 3 { _ = r.tick(now: t); t += 0.05 }
        var q = DNSMessage(id: 0x1234)
        q.questions = [DNSQuestion(name: "x._ferry._tcp.local", type: .srv)]
        let from = try! SocketAddress(ipAddress: "10.0.0.9", port: 40000)
        let out = r.handle(q, from: from, interface: 1, now: t)
        #expect(out.count == 1)
        #expect(out.first?.destination == .unicast(from))
        #expect(out.first?.message.id == 0x1234)
        #expect(out.first?.message.questions == q.questions)
        #expect(out.first?.message.answers.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush } == true)
    }

    @Test func anInstanceThatStopsAnsweringExpiresWithItsTTL() {
        var ttls = MDNSTTLs()
        ttls.host = 10
        var link = Self.announced("gone", ttls: ttls)
        #expect(link.browsers[0].services.count == 1)
        // The host vanishes without a goodbye (SIGKILL): its maintenance queries go
        // unanswered and its SRV expires 10 s after it was last heard.
        link.responders = []
        var maintenance = 0
        var lostAt: Double?
        while link.now < 20 && lostAt == nil {
            let out = link.browsers[0].tick(now: link.now)
            maintenance += out.filter { $0.message.questions.contains { $0.type == .srv } }.count
            if link.browsers[0].takeEvents().contains(where: { if case .lost = $0 { true } else { false } }) { lostAt = link.now }
            link.now += 0.01
        }
        #expect(maintenance >= 3)
        #expect(lostAt.map { $0 <= 13.1 } == true, "lost at \(String(describing: lostAt))")
    }

    @Test func reconfirmationFlushesAnInstanceWhoseHostIsSilent() {
        var link = Self.announced("silent")
        guard let s = link.browsers[0].services.first else { Issue.record("not found"); return }
        _ = link.browsers[0].takeEvents()
        link.responders = []
        link.browsers[0].reconfirm(s.fullName, now: link.now)
        let start = link.now
        link.run(until: start + 6)
        #expect(link.browsers[0].services.isEmpty)
        #expect(link.browsers[0].takeEvents().contains(.lost(name: s.fullName, reason: "expired")))
    }
}
