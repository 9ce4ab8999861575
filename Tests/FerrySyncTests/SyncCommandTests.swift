import FerryNet
import FerryStore
@testable import FerrySync
import Foundation
import Testing

/// Runs the built `ferry` with `args`; returns its exit status, standard output and error, and
/// how long it ran. Both pipes are read together (off the cooperative pool) so neither fills.
private func runFerryTimed(_ args: [String]) async throws -> (status: Int32, out: String, err: String, seconds: Double) {
    let p = Process()
    let out = Pipe(), err = Pipe()
    p.executableURL = ferryExecutable
    p.arguments = args
    p.standardOutput = out
    p.standardError = err
    let started = ContinuousClock.now
    try p.run()
    async let o = offPool { out.fileHandleForReading.readDataToEndOfFile() }
    async let e = offPool { err.fileHandleForReading.readDataToEndOfFile() }
    let (od, ed) = await (o, e)
    await offPool { p.waitUntilExit() }
    let seconds = (ContinuousClock.now - started) / .seconds(1)
    return (p.terminationStatus, String(decoding: od, as: UTF8.self), String(decoding: ed, as: UTF8.self), seconds)
}

/// A `ferry serve` process on port 0 (any arguments: users, TLS); its first line gives the port.
private final class ServedPeer: Sendable {
    let process: Process
    let port: Int

    init(_ args: [String]) async throws {
        let p = Process()
        let out = Pipe()
        p.executableURL = ferryExecutable
        p.arguments = ["serve", "--port", "0"] + args
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let handle = out.fileHandleForReading
        let line = await offPool { readLine(from: handle) } ?? ""
        // "ferry: serving PATH at ws://127.0.0.1:PORT/NAME/_blipsync and …" (wss:// with TLS)
        guard let url = line.split(separator: " ").first(where: { $0.hasPrefix("ws://") || $0.hasPrefix("wss://") }),
              let port = url.split(separator: "/").dropFirst().first?.split(separator: ":").last.flatMap({ Int($0) }) else {
            p.terminate()
            throw ReplicationError.protocolError("ferry serve did not start: \(line)")
        }
        process = p
        self.port = port
    }

    func stop() async {
        process.terminate()
        let p = process
        await offPool { p.waitUntilExit() }
    }
}

/// `ferry sync`'s controls and exit codes, run as the built binary against `ferry serve`
/// processes or in-process peers (where the peer needs a validator or a pull filter, which
/// `ferry serve` has no flag for).
@Suite("ferry sync: controls and exit codes")
struct SyncCommandTests {
    /// A closed port: the sync gives up within --timeout (plus slack for the last attempt and
    /// the process) with exit 3 and one line saying why; --max-attempts stops it sooner.
    @Test func anUnreachablePeerExits3WithinTheTimeout() async throws {
        let dir = TempDir()
        let byTime = try await runFerryTimed(["sync", "ws://127.0.0.1:1/nobody", "--db", dir.path("a.db"), "--timeout", "3"])
        #expect(byTime.status == 3, "\(byTime.err)")
        let reason = byTime.err.split(separator: "\n").filter { $0.hasPrefix("ferry: gave up on ws://127.0.0.1:1/nobody, unreachable after") }
        #expect(reason.count == 1, "\(byTime.err)")
        #expect(byTime.err.contains("--timeout 3 s"), "\(byTime.err)")
        // The replicator's own clock (from the first failed attempt): within the timeout. The
        // process's wall clock also counts its start, which a loaded machine (the whole suite
        // in parallel on 2 cores) stretches: 2.9 s alone, 14-25 s under the full suite; the
        // two-minute bound still tells it from retrying on (8.5 minutes before --timeout existed).
        let line = String(reason.first ?? "")
        var spent: Int?
        if let r = line.range(of: " in ") { spent = Int(line[r.upperBound...].prefix { $0.isNumber }) }
        #expect(spent != nil && spent! <= 3, "\(line)")
        #expect(byTime.seconds < 3 + 120, "gave up after \(byTime.seconds) s with --timeout 3")
        print("unreachable, --timeout 3: exit \(byTime.status) after \(byTime.seconds) s: \(reason.first ?? "")")

        let byAttempts = try await runFerryTimed(["sync", "ws://127.0.0.1:1/nobody", "--db", dir.path("a.db"), "--max-attempts", "2",
                                                  "--timeout", "0"])
        #expect(byAttempts.status == 3, "\(byAttempts.err)")
        #expect(byAttempts.err.contains("unreachable after 2 attempts"), "\(byAttempts.err)")
        #expect(byAttempts.seconds < 1 + 120, "two attempts took \(byAttempts.seconds) s")
        print("unreachable, --max-attempts 2: exit \(byAttempts.status) after \(byAttempts.seconds) s")
    }

    /// A peer that requires Basic authentication: wrong credentials, in the URL or as
    /// --user/--password, exit 4 and move nothing; the right ones sync (exit 0).
    @Test func wrongCredentialsExit4() async throws {
        let dir = TempDir()
        let peer = try await ServedPeer(["--db", dir.path("naomi.db"), "--user", "naomi", "--password", "s3cret"])
        try await runFerry(["put", "--db", dir.path("molly.db"), "m", #"{"v":1}"#])
        let base = "127.0.0.1:\(peer.port)/naomi"
        for args in [["ws://naomi:nope@\(base)"], ["ws://\(base)", "--user", "naomi", "--password", "nope"], ["ws://\(base)"]] {
            let r = try await runFerryTimed(["sync", "--db", dir.path("molly.db")] + args)
            #expect(r.status == 4, "\(args): \(r.err)")
            #expect(r.err.contains("ferry: authentication refused by ws://"), "\(r.err)")
            #expect(!r.err.contains("nope"), "the password is not repeated: \(r.err)")
        }
        let ok = try await runFerryTimed(["sync", "--db", dir.path("molly.db"), "ws://naomi:s3cret@\(base)"])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(ok.out.contains("1 pushed"), "\(ok.out)")
        await peer.stop()
    }

    /// A `wss://` peer whose certificate we do not accept (a pin that does not match; no pin and
    /// a certificate from an authority the system store does not know) exits 5 at once.
    @Test func aRefusedCertificateExits5() async throws {
        let dir = TempDir()
        let pki = TestPKI()
        let identity = pki.server()
        let peer = try await ServedPeer(["--db", dir.path("naomi.db"), "--allow-anonymous",
                                         "--tls-cert", identity.certificatePath, "--tls-key", identity.keyPath])
        let url = "wss://127.0.0.1:\(peer.port)/naomi"
        let wrongPin = String(repeating: "ab", count: 32)
        for extra in [["--pin", wrongPin], []] {
            let r = try await runFerryTimed(["sync", url, "--db", dir.path("molly.db"), "--timeout", "600"] + extra)
            #expect(r.status == 5, "\(extra): \(r.err)")
            #expect(r.err.contains("ferry: TLS refused with wss://"), "\(r.err)")
            // Not retried until the ten-minute timeout (1 s alone; more under the full suite's load).
            #expect(r.seconds < 120, "refused at once, not retried: \(r.seconds) s")
            #expect(!r.err.contains("attempts"), "\(r.err)")
        }
        // With its authority trusted, the same peer is accepted.
        let ok = try await runFerryTimed(["sync", url, "--db", dir.path("molly.db"), "--ca", pki.ca.certificatePath])
        #expect(ok.status == 0, "\(ok.err)")
        await peer.stop()
    }

    /// The peer's validation rejects two of the pushed documents: the rest arrive, the sync
    /// names the two on standard error and exits 1.
    @Test func documentsRejectedByThePeerAreNamedAndExit1() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        naomi.db.setValidation(named: "noSecrets") { rev, _ in
            rev.properties["secret"] != nil ? .reject(message: "secrets stay home") : .accept
        }
        let dir = TempDir()
        let local = try Database.open(at: dir.path("molly.db"))
        for i in 0..<8 { try local.save(Document(id: "doc\(i)", properties: i % 4 == 1 ? ["secret": "x"] : ["ok": true])) }
        local.close()
        let r = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("molly.db")])
        #expect(r.status == 1, "\(r.err)")
        #expect(r.err.contains("ferry: doc1 failed: rejected by the peer (403): secrets stay home"), "\(r.err)")
        #expect(r.err.contains("ferry: doc5 failed: rejected by the peer (403): secrets stay home"), "\(r.err)")
        #expect(r.err.contains("ferry: 2 documents failed: doc1, doc5") || r.err.contains("ferry: 2 documents failed: doc5, doc1"),
                "\(r.err)")
        #expect(r.out.contains("6 pushed"), "\(r.out)")
        #expect(try naomi.db.documentCount() == 6)
        #expect(try naomi.db.document("doc1") == nil)
        await naomi.stop()
    }

    /// Issue 30: the peer's deletion wins over a local edit. The edit's branch is closed
    /// locally, and that tombstone is a branch the peer never had; a passive peer in
    /// no-conflicts mode (Sync Gateway 4.2) answers such a tombstone 409 — here a validator
    /// does, for any closing tombstone. That refusal means "nothing to close here", not a
    /// failure: exit 0, nothing failed, and both sides hold the deletion.
    @Test func aWinningRemoteDeletionTakesThe409ForATombstoneThePeerNeverHad() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        naomi.db.setValidation(named: "likeSyncGateway") { rev, _ in
            rev.isDeletion && rev.properties["ferry:closed"] != nil
                ? .reject(message: "tombstone updates to non-leaf or already tombstoned revisions aren't valid when allow_conflicts=false", status: 409)
                : .accept
        }
        let dir = TempDir()
        let path = dir.path("molly.db")
        let first = try await runFerryTimed(["put", "--db", path, "task", #"{"title":"milk"}"#])
        #expect(first.status == 0, "\(first.err)")
        let shared = try await runFerryTimed(["sync", naomi.url, "--db", path])
        #expect(shared.status == 0, "\(shared.err)")
        let naomiDoc = try #require(try naomi.db.document("task"))
        try naomi.db.delete(naomiDoc)
        #expect(try await runFerryTimed(["put", "--db", path, "task", #"{"title":"oat milk"}"#]).status == 0)

        let r = try await runFerryTimed(["sync", naomi.url, "--db", path])
        #expect(r.status == 0, "\(r.out) \(r.err)")
        #expect(!r.err.contains("failed"), "\(r.err)")
        #expect(try naomi.db.document("task") == nil)
        let local = try Database.open(at: path)
        #expect(try local.document("task") == nil, "the deletion wins here too")
        let tree = try #require(try local.revisionTree(of: "task"))
        #expect(tree.leaves.contains { $0.isClosed }, "the local edit is closed, not removed")
        local.close()
        await naomi.stop()
    }

    /// --doc-id moves only the named documents, both ways, between two `ferry serve` files.
    @Test func docIDsMoveOnlyThoseDocuments() async throws {
        let dir = TempDir()
        for id in ["a", "b", "c"] { try await runFerry(["put", "--db", dir.path("naomi.db"), id, #"{"on":"naomi"}"#]) }
        for id in ["x", "y", "z"] { try await runFerry(["put", "--db", dir.path("molly.db"), id, #"{"on":"molly"}"#]) }
        let peer = try await ServedPeer(["--db", dir.path("naomi.db"), "--allow-anonymous"])
        let r = try await runFerryTimed(["sync", "ws://127.0.0.1:\(peer.port)/naomi", "--db", dir.path("molly.db"),
                                         "--doc-id", "a", "--doc-id", "x", "--doc-id", "nowhere"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("1 pushed, 1 pulled"), "\(r.out)")
        await peer.stop()
        let molly = try Database.open(at: dir.path("molly.db")), naomi = try Database.open(at: dir.path("naomi.db"))
        #expect(try Set(molly.allDocuments().map(\.id)) == ["a", "x", "y", "z"])
        #expect(try Set(naomi.allDocuments().map(\.id)) == ["a", "b", "c", "x"])
        molly.close(); naomi.close()
    }

    /// --filter NAME --param K=V pulls through the peer's registered pull filter; an unknown
    /// filter is the peer's refusal (exit 1); --param without --filter is a usage error (2).
    @Test func aNamedPullFilterWithParameters() async throws {
        let naomi = try await Peer.make("naomi", serving: true)
        let listener = try #require(naomi.listener)
        listener.registerPullFilter("byOwner") { doc, _, params in doc["owner"]?.stringValue == params["owner"] }
        for i in 0..<6 { try naomi.put("d\(i)", ["owner": i < 2 ? "molly" : "naomi"]) }
        let dir = TempDir()
        let r = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("molly.db"), "--pull",
                                         "--filter", "byOwner", "--param", "owner=molly"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("2 pulled"), "\(r.out)")
        let unknown = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("other.db"), "--pull", "--filter", "nope"])
        #expect(unknown.status == 1, "\(unknown.err)")
        #expect(unknown.err.contains("ferry: replication failed: "), "\(unknown.err)")
        for bad in [["--param", "owner=molly"], ["--filter", "byOwner", "--param", "owner"], ["--push", "--filter", "byOwner"],
                    ["--batch-size", "0"], ["--push", "--pull"]] {
            let u = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("other.db")] + bad)
            #expect(u.status == 2, "\(bad): exit \(u.status): \(u.err)")
        }
        await naomi.stop()
        let molly = try Database.open(at: dir.path("molly.db"))
        #expect(try Set(molly.allDocuments().map(\.id)) == ["d0", "d1"])
        molly.close()
    }

    /// --batch-size is accepted and a sync in batches of 1 and of 3 moves everything both ways.
    @Test func batchSizeIsAcceptedAndEverythingArrives() async throws {
        let dir = TempDir()
        let naomi = try await Peer.make("naomi", serving: true)
        for i in 0..<7 { try naomi.put("n\(i)", ["i": .int(Int64(i))]) }
        let local = try Database.open(at: dir.path("molly.db"))
        for i in 0..<5 { try local.save(Document(id: "m\(i)", properties: ["i": .int(Int64(i))])) }
        local.close()
        let r = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("molly.db"), "--batch-size", "1"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("5 pushed, 7 pulled"), "\(r.out)")
        for i in 7..<10 { try naomi.put("n\(i)", ["i": .int(Int64(i))]) }
        let again = try await runFerryTimed(["sync", naomi.url, "--db", dir.path("molly.db"), "--batch-size", "3"])
        #expect(again.status == 0 && again.out.contains("0 pushed, 3 pulled"), "\(again.out) \(again.err)")
        #expect(try naomi.db.documentCount() == 15)
        await naomi.stop()
    }

    /// `ferry sync --help` documents the exit codes and shows examples.
    @Test func helpDocumentsExitCodesAndExamples() async throws {
        let r = try await runFerryTimed(["sync", "--help"])
        #expect(r.status == 0)
        for line in ["3  unreachable", "4  authentication refused", "5  TLS refused", "Example:", "--doc-id", "--filter", "--batch-size"] {
            #expect(r.out.contains(line), "\(line) missing from ferry sync --help")
        }
        let serve = try await runFerryTimed(["serve", "--help"])
        #expect(serve.status == 0 && serve.out.contains("Example:"))
    }
}
