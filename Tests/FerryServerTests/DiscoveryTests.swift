import FerryDiscovery
import FerryDNS
import FerryNet
import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// Discovery groups and static peers between in-process daemons (Protocol/dns-sd.md, "Groups
/// and trust"). Multicast stays on the loopback interface, on a UDP port of the test's own
/// (not 5353), so other tests' daemons and the machine's mDNS stacks are not in the way.
@Suite("Discovery: groups, strangers, static peers")
struct DiscoveryTests {
    static let admin = DaemonFixture.user("root", "pw", ["*": .admin])
    static let root = ("root", "pw")

    static func member(_ name: String, secret: String, mdnsPort: Int, group: String? = "lab",
                       advertise: Bool = true, statics: [String] = []) async throws -> DaemonFixture {
        try await DaemonFixture(users: [admin], databases: ["db"]) { c in
            var p = PeerCoordinator.Configuration(instanceName: name)
            p.interfaces = ["lo"]
            p.mdnsPort = mdnsPort
            p.advertise = advertise
            p.staticPeers = statics
            p.group = DiscoveryGroup(name: group ?? "static", secret: secret)
            p.discover = group != nil
            c.peers = p
            c.retryMaxWait = 1
        }
    }

    static func peers(_ f: DaemonFixture) async throws -> [[String: JSONValue]] {
        try await f.request("GET", "/_discovery", user: root).object["peers"]?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    static func has(_ f: DaemonFixture, _ id: String) async throws -> Bool {
        try await f.request("GET", "/db/\(id)", user: root).status == 200
    }

    static func jobs(_ f: DaemonFixture) -> [String] { f.daemon.scheduler.entries.map(\.spec.id) }

    static func freePort() -> Int { Int.random(in: 20_000..<60_000) }

    @Test func membersFindEachOtherAndReplicateAndAStrangerIsListedNotTrusted() async throws {
        let port = Self.freePort()
        let a = try await Self.member("alpha", secret: "right", mdnsPort: port)
        defer { Task { await a.stop() } }
        let b = try await Self.member("beta", secret: "right", mdnsPort: port)
        defer { Task { await b.stop() } }
        let stranger = try await Self.member("mallory", secret: "wrong", mdnsPort: port)
        defer { Task { await stranger.stop() } }
        _ = try await a.request("PUT", "/db/from-a", json: #"{"x":1}"#, user: Self.root)
        _ = try await b.request("PUT", "/db/from-b", json: #"{"x":2}"#, user: Self.root)
        _ = try await stranger.request("PUT", "/db/from-stranger", json: #"{"x":3}"#, user: Self.root)

        #expect(try await eventually {
            let ab = try await Self.has(a, "from-b"), ba = try await Self.has(b, "from-a")
            return ab && ba
        })
        // The stranger is listed on both members with the reason, and never trusted.
        #expect(try await eventually {
            try await Self.peers(a).contains { $0["name"]?.stringValue == "mallory" }
        })
        let listed = try #require(try await Self.peers(a).first { $0["name"]?.stringValue == "mallory" })
        #expect(listed["trusted"] == .bool(false))
        #expect(listed["reason"]?.stringValue?.contains("wrong group secret") == true)
        // Each member replicates with the other (a member that saw the other before its
        // database existed starts when the new list is announced).
        #expect(try await eventually {
            try await Self.peers(a).first { $0["name"]?.stringValue == "beta" }?["replicating"] == .array(["db"])
        })
        let beta = try #require(try await Self.peers(a).first { $0["name"]?.stringValue == "beta" })
        #expect(beta["trusted"] == .bool(true))
        // A member's only job is with the other member; the stranger, whose secret does not
        // verify the members' proofs either, has none.
        let strangerID = try #require(try await stranger.request("GET", "/", user: Self.root).object["uuid"]?.stringValue)
        #expect(Self.jobs(a).count == 1 && !Self.jobs(a).contains { $0.contains(strangerID) })
        #expect(Self.jobs(stranger).isEmpty)
        for (f, id) in [(a, "from-stranger"), (b, "from-stranger"), (stranger, "from-a"), (stranger, "from-b")] {
            let present = try await Self.has(f, id)
            #expect(!present)
        }
        // Writes keep flowing between members.
        _ = try await a.request("PUT", "/db/later", json: #"{"x":4}"#, user: Self.root)
        #expect(try await eventually { try await Self.has(b, "later") })
        let leaked = try await Self.has(stranger, "later")
        #expect(!leaked)
    }

    @Test func aMemberThatLeavesIsDroppedAtItsGoodbye() async throws {
        let port = Self.freePort()
        let a = try await Self.member("alpha", secret: "s", mdnsPort: port)
        defer { Task { await a.stop() } }
        let b = try await Self.member("beta", secret: "s", mdnsPort: port)
        #expect(try await eventually { Self.jobs(a).count == 1 })
        await b.stop()
        // Gone at its goodbye: within a second between namespaces (Tests/Discovery/check
        // measures it); here the test process is shared with every other suite, so the
        // proof is the reason recorded, not the time.
        #expect(try await eventually { Self.jobs(a).isEmpty })
        let departed = try await a.request("GET", "/_discovery", user: Self.root).object["departed"]?.arrayValue ?? []
        #expect(departed.last?.objectValue?["name"] == .string("beta"))
        #expect(departed.last?.objectValue?["reason"] == .string("goodbye"))
    }

    @Test func staticPeersReplicateWithTheGroupsCredentialsWithoutMulticast() async throws {
        // Neither advertises nor browses: only the static list.
        let port = Self.freePort()
        let a = try await Self.member("alpha", secret: "s", mdnsPort: port, group: nil, advertise: false)
        defer { Task { await a.stop() } }
        let b = try await Self.member("beta", secret: "s", mdnsPort: port, group: nil, advertise: false,
                                      statics: ["ws://127.0.0.1:\(a.daemon.port)"])
        defer { Task { await b.stop() } }
        _ = try await a.request("PUT", "/db/from-a", json: #"{"x":1}"#, user: Self.root)
        _ = try await b.request("PUT", "/db/from-b", json: #"{"x":2}"#, user: Self.root)
        #expect(try await eventually {
            let ab = try await Self.has(a, "from-b"), ba = try await Self.has(b, "from-a")
            return ab && ba
        })
        let listed = try await Self.peers(b)
        #expect(listed.count == 1)
        #expect(listed.first?["source"] == JSONValue.string("static"))
        #expect(listed.first?["trusted"] == JSONValue.bool(true))
        // A static peer with the wrong secret is refused by the other side and moves nothing.
        let c = try await Self.member("gamma", secret: "other", mdnsPort: port, group: nil, advertise: false,
                                      statics: ["ws://127.0.0.1:\(a.daemon.port)"])
        defer { Task { await c.stop() } }
        #expect(try await eventually {
            try await Self.peers(c).first?["reason"]?.stringValue?.contains("401") == true
        })
        let reached = try await Self.has(c, "from-a")
        #expect(!reached)
    }

    @Test func theProofAndThePasswordComeFromTheSecretAndAreNotIt() {
        let g = DiscoveryGroup(name: "lab", secret: "s3cret")
        let claim = DiscoveryGroup.Claim(peerID: "abc", port: 4984, pin: nil, addresses: ["10.0.0.2", "fd00::2"], timestamp: 1_800_000_000)
        let proof = g.proof(claim)
        #expect(proof?.count == 32)
        #expect(g.verify(proof: proof, claim))
        func changed(_ edit: (inout DiscoveryGroup.Claim) -> Void) -> DiscoveryGroup.Claim { var c = claim; edit(&c); return c }
        #expect(g.verify(proof: proof, changed { $0.addresses = ["fd00::2", "10.0.0.2"] }), "addresses are signed in sorted order")
        #expect(!g.verify(proof: proof, changed { $0.peerID = "abd" }))
        #expect(!g.verify(proof: proof, changed { $0.port = 4985 }))
        #expect(!g.verify(proof: proof, changed { $0.pin = String(repeating: "a", count: 64) }))
        #expect(!g.verify(proof: proof, changed { $0.addresses = ["10.0.0.66"] }))
        #expect(!g.verify(proof: proof, changed { $0.timestamp += 1 }))
        #expect(!DiscoveryGroup(name: "lab", secret: "other").verify(proof: proof, claim))
        #expect(g.password != nil && g.password?.contains("s3cret") == false)
        #expect(DiscoveryGroup(name: "lab", secret: nil).validate() != nil)
        #expect(DiscoveryGroup(name: "bad name", secret: "x").validate() != nil)
    }

    /// A member's advertisement as another host on the link would see it, with the addresses
    /// it was heard from.
    static func heard(_ txt: [(key: String, value: String?)], from addresses: [String]) throws -> PeerRecord {
        let s = DiscoveredService(name: "member", fullName: try DNSName("member._ferry._tcp.local"),
                                  hostName: try DNSName("member.local"), port: 4984, addresses: addresses,
                                  txt: Dictionary(txt.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a }), interfaces: [])
        return try #require(PeerRecord(s))
    }

    @Test func aReplayedOrStaleAdvertisementIsNotTrusted() throws {
        let g = DiscoveryGroup(name: "lab", secret: "s3cret")
        let now: Int64 = 1_800_000_000
        let txt = PeerRecord.txt(id: "abc", databases: ["db"], tls: false, pin: nil, group: g, port: 4984,
                                 addresses: ["10.0.0.2", "fe80::2"], timestamp: now)
        // Heard from its own address: trusted, and reached there.
        let genuine = try Self.heard(txt, from: ["10.0.0.2"])
        #expect(genuine.distrust(in: g, now: now + 10) == nil)
        #expect(genuine.url(for: "db") == "ws://10.0.0.2:4984/db")
        // The same TXT replayed by a host at another address: listed, not trusted, and never
        // given a URL that reaches the replayer.
        let replayed = try Self.heard(txt, from: ["10.0.0.66"])
        #expect(replayed.distrust(in: g, now: now + 10)?.contains("does not name") == true)
        #expect(replayed.url(for: "db") == nil)
        // Both addresses: only the signed one is used.
        #expect(try Self.heard(txt, from: ["10.0.0.66", "10.0.0.2"]).url(for: "db") == "ws://10.0.0.2:4984/db")
        // Replayed later than a proof lives (or its clock far ahead): not trusted.
        #expect(genuine.distrust(in: g, now: now + PeerRecord.proofLifetime + 1)?.contains("old") == true)
        #expect(genuine.distrust(in: g, now: now - PeerRecord.proofLifetime - 1)?.contains("future") == true)
        // An address edited into the TXT breaks the proof.
        var forged = txt
        forged = forged.map { $0.key == "addr" ? ("addr", "10.0.0.66") : $0 }
        #expect(try Self.heard(forged, from: ["10.0.0.66"]).distrust(in: g, now: now)?.contains("proof does not match") == true)
    }
}
