import FerryDNS
import FerryNet
import Foundation
import Logging
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import FerryDiscovery

/// Agents on real UDP sockets, port 5353, on the loopback interface only (no packet leaves
/// the machine). Each test uses a service type of its own, so tests running at once and any
/// other mDNS stack on the machine do not disturb it.
@Suite struct MDNSAgentTests {
    static func uniqueType() -> String { "_ft" + String(UInt32.random(in: 0...UInt32.max), radix: 16) + "._tcp" }

    static func agent(_ loop: EventLoop, type: String, advertise name: String?, host: String = "ferry-\(UInt16.random(in: 0...UInt16.max))",
                      txt: [(key: String, value: String?)] = []) async throws -> MDNSAgent {
        var c = MDNSAgent.Configuration(hostLabel: host)
        c.interfaces = ["lo"]
        c.ipv6 = false
        c.browse = type
        if let name { c.advertisement = ServiceAdvertisement(instanceName: name, serviceType: type, port: 4984, txt: txt) }
        return try await MDNSAgent.start(c, loop: loop, logger: Logger(label: "test.mdns"))
    }

    /// The first event matching `match` within `seconds`.
    static func next(_ agent: MDNSAgent, within seconds: Double, _ match: @escaping @Sendable (DiscoveryEvent) -> Bool) async -> DiscoveryEvent? {
        await withTaskGroup(of: DiscoveryEvent?.self) { g in
            g.addTask { for await e in agent.events where match(e) { return e }; return nil }
            g.addTask { try? await Task.sleep(for: .seconds(seconds)); return nil }
            let first = await g.next() ?? nil
            g.cancelAll()
            return first
        }
    }

    @Test func twoAgentsFindEachOtherOnLoopbackAndAGoodbyeRemovesTheInstance() async throws {
        let loop = try EventLoop(name: "mdns-test")
        defer { loop.shutdown() }
        let type = Self.uniqueType()
        let a = try await Self.agent(loop, type: type, advertise: "alpha", txt: [("id", "aaa"), ("dbs", "db,notes")])
        let b = try await Self.agent(loop, type: type, advertise: "beta", txt: [("id", "bbb")])
        let foundAlpha = await Self.next(b, within: 30) { if case .found(let s) = $0 { s.name == "alpha" } else { false } }
        guard case .found(let alpha) = foundAlpha else { Issue.record("b did not find alpha"); return }
        #expect(alpha.value("dbs") == "db,notes")
        #expect(alpha.port == 4984)
        #expect(alpha.addresses.contains("127.0.0.1"))
        let foundBeta = await Self.next(a, within: 30) { if case .found(let s) = $0 { s.name == "beta" } else { false } }
        #expect(foundBeta != nil)

        await a.stop()
        // Lost by its goodbye (the records' TTL is 120 s, so nothing else could remove it in
        // this window). How fast is measured between namespaces by Tests/Discovery/check: in
        // this process every other suite shares the threads that deliver the event.
        let lost = await Self.next(b, within: 30) { if case .lost(let n, _) = $0 { n == alpha.fullName } else { false } }
        #expect(lost == .lost(name: alpha.fullName, reason: "goodbye"))
        await b.stop()
    }

    @Test func malformedPacketsAreDroppedAndCounted() async throws {
        let loop = try EventLoop(name: "mdns-test")
        defer { loop.shutdown() }
        let a = try await Self.agent(loop, type: Self.uniqueType(), advertise: nil)
        let before = await a.statistics()
        // A pointer to itself, a length past the end, and a name of 9,000 bytes of labels.
        let selfPointer: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 12, 0, 1]
        let pastEnd: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x3F, 0x61]
        let long: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0] + Array(repeating: [0x3F] + [UInt8](repeating: 0x61, count: 63), count: 139).flatMap { $0 } + [0, 0, 1, 0, 1]
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_port = UInt16(5353).bigEndian
        to.sin_addr.s_addr = inet_addr("224.0.0.251")
        var lo = ip_mreqn()
        lo.imr_ifindex = Int32(if_nametoindex("lo"))
        _ = setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &lo, socklen_t(MemoryLayout<ip_mreqn>.size))
        for p in [selfPointer, pastEnd, long] {
            _ = p.withUnsafeBytes { b in withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } }
        }
        var after = await a.statistics()
        let deadline = ContinuousClock.now + .seconds(5)
        while after.malformed < before.malformed + 3 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            after = await a.statistics()
        }
        #expect(after.malformed >= before.malformed + 3)
        await a.stop()
    }
}
