import FerryNet
import FerryStore
@testable import FerrySync
import Foundation
import Testing

/// Replication over `wss://`: peers with self-signed certificates pinned by each other (the
/// peer-to-peer setup), mutual TLS, and refusals that stop the replicator instead of retrying.
@Suite struct TLSReplicationTests {
    let pki = TestPKI()

    @Test func pinnedSelfSignedPeersReplicateBothWays() async throws {
        let id = TestPKI.selfSigned(in: pki.dir, name: "bob")
        let bob = try await Peer.make("bob", serving: true,
                                      tls: TLSServerConfiguration(certificateChain: .file(id.certificatePath), privateKey: .file(id.keyPath)))
        let alice = try await Peer.make("alice")
        #expect(bob.url.hasPrefix("wss://"))
        try bob.put("from-bob", ["n": 1])
        try alice.put("from-alice", ["n": 2])
        let pin = CertificatePin(.certificate, of: try TLSCertificate(pem: id.certificatePEM))
        try await replicate(alice, with: bob) { $0.tls = TLSClientConfiguration(trust: .pinnedCertificatesOnly, pins: [pin]) }
        #expect(try alice.body("from-bob") == ["n": 1])
        #expect(try bob.body("from-alice") == ["n": 2])

        // Another certificate in bob's place: the replicator stops at once with the reason
        // (a certificate problem is permanent; it does not retry).
        let stranger = CertificatePin(.certificate, sha256: [UInt8](repeating: 1, count: 32))
        var c = ReplicatorConfiguration(database: alice.db, target: bob.url)
        c.tls = TLSClientConfiguration(trust: .pinnedCertificatesOnly, pins: [stranger])
        let r = Replicator(configuration: c)
        await #expect(throws: ReplicationError.self) { try await r.run() }
        guard case .tls(.certificateRejected(let why))? = r.status.lastError else {
            Issue.record("expected a certificate rejection, got \(String(describing: r.status.lastError))")
            return
        }
        #expect(why.reason == .pinMismatch)
        await alice.stop()
        await bob.stop()
    }

    @Test func mutualTLSReplication() async throws {
        let id = pki.server()
        var tls = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM))
        tls.clientAuthentication = .required(trusting: .pem(pki.ca.certificatePEM))
        let carol = try await Peer.make("carol", serving: true, tls: tls)
        let dave = try await Peer.make("dave")
        try carol.put("doc", ["v": "carol"])
        let url = carol.url.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let client = pki.client("dave")
        var trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
        trust.identity = TLSIdentity(certificateChain: .pem(client.certificatePEM), privateKey: .pem(client.keyPEM))
        var c = ReplicatorConfiguration(database: dave.db, target: url)
        c.type = .pull
        c.tls = trust
        try await Replicator(configuration: c).run()
        #expect(try dave.body("doc") == ["v": "carol"])
        await carol.stop()
        await dave.stop()
    }

    /// `ferry sync wss://… --pin` against a TLS listener, and a wrong pin refused with exit 1.
    @Test func commandLinePullOverTLS() async throws {
        let id = TestPKI.selfSigned(in: pki.dir, name: "erin")
        let erin = try await Peer.make("erin", serving: true,
                                       tls: TLSServerConfiguration(certificateChain: .file(id.certificatePath), privateKey: .file(id.keyPath)))
        try erin.put("greeting", ["text": "hi over TLS"])
        let cert = try TLSCertificate(pem: id.certificatePEM)
        let hex = cert.sha256.map { String(format: "%02X", $0) }.joined(separator: ":")
        let dir = TempDir()
        let (status, output) = try await runFerry(["sync", erin.url, "--db", dir.path("frank.ferry"), "--pull", "--pin", hex])
        #expect(status == 0, "\(output)")
        let frank = try Database.open(at: dir.path("frank.ferry"))
        #expect(try frank.document("greeting")?["text"] == "hi over TLS")
        frank.close()
        let wrong = String(repeating: "ab", count: 32)
        let (refused, _) = try await runFerry(["sync", erin.url, "--db", dir.path("frank.ferry"), "--pull", "--pin", wrong])
        #expect(refused != 0)
        await erin.stop()
    }
}
