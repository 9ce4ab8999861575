@testable import FerryNet
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// What one end of a TLS connection saw: plaintext received, how it closed, the peer.
final class TLSProbe: ConnectionHandler, @unchecked Sendable {
    // Safety: the handler methods run on the connection's loop; tests read only the values the
    // stream carried (or `closed`, after the stream has ended).
    enum Event: Sendable, Equatable { case data(String), inputClosed, closed(NetError?) }
    let events: AsyncStream<Event>
    private let cont: AsyncStream<Event>.Continuation
    /// Echo what arrives (a server) instead of just reporting it.
    let echo: Bool
    /// Close (with close_notify) after the first echo.
    var closeAfterEcho = false
    let peer = Mutex<TLSCertificate?>(nil)
    let version = Mutex<String>("")

    init(echo: Bool = false) {
        self.echo = echo
        (events, cont) = AsyncStream<Event>.makeStream()
    }

    func connectionRead(_ c: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
        if let s = c.tlsSession {
            peer.withLock { $0 = s.peerCertificate }
            version.withLock { $0 = s.protocolVersion }
        }
        if echo {
            c.write(UnsafeRawBufferPointer(bytes))
            if closeAfterEcho { c.close() }
        }
        cont.yield(.data(String(decoding: bytes, as: UTF8.self)))
    }
    func connectionWritabilityChanged(_ c: TCPConnection, writable: Bool) {}
    func connectionInputClosed(_ c: TCPConnection) { cont.yield(.inputClosed) }
    func connectionClosed(_ c: TCPConnection, error: NetError?) { cont.yield(.closed(error)); cont.finish() }

    /// Plaintext received until the connection closed or `until` appeared; and the close error.
    func collect(until: String? = nil) async -> (text: String, closed: NetError??) {
        var text = ""
        for await e in events {
            switch e {
            case .data(let s):
                text += s
                if let until, text.hasSuffix(until) { return (text, nil) }
            case .inputClosed: continue
            case .closed(let error): return (text, .some(error))
            }
        }
        return (text, nil)
    }
}

/// A TLS echo server on loopback whose accepted connections report through `accepted`.
struct TLSEchoServer {
    let listener: TCPListener
    let accepted: AsyncStream<TLSProbe>
    var port: Int { listener.boundAddress.port }

    init(group: EventLoopGroup, _ configuration: TLSServerConfiguration, closeAfterEcho: Bool = false) async throws {
        let context = try TLSContext(server: configuration)
        let (stream, cont) = AsyncStream<TLSProbe>.makeStream()
        accepted = stream
        listener = try await TCPListener.bind(host: "127.0.0.1", port: 0, group: group, tls: context) { conn in
            let probe = TLSProbe(echo: true)
            probe.closeAfterEcho = closeAfterEcho
            conn.start(handler: probe)
            cont.yield(probe)
        }
    }

    /// The next accepted connection's probe.
    func next() async -> TLSProbe? {
        var it = accepted.makeAsyncIterator()
        return await it.next()
    }
}

/// Connects with TLS to 127.0.0.1:`port` as `serverName`, sends `message`; returns the client's
/// probe and connection (both on `loop`).
func tlsConnect(port: Int, on loop: EventLoop, _ configuration: TLSClientConfiguration, serverName: String = "localhost",
                send message: String = "hello") async throws -> (TLSProbe, TCPConnection) {
    let context = try TLSContext(client: configuration)
    let probe = TLSProbe()
    let addresses = try await Resolver.resolve(host: "127.0.0.1", port: port)
    // TLS starts in the connect callback, on the loop: no hop through the (possibly busy)
    // test thread pool between the server's accept and our ClientHello, which the server's
    // handshake timeout would otherwise count.
    let result: Result<TCPConnection, NetError> = await withCheckedContinuation { c in
        TCPConnection.connect(to: addresses[0], on: loop) { r in
            switch r {
            case .failure(let e): c.resume(returning: .failure(e))
            case .success(let conn):
                do throws(NetError) { try conn.startTLS(context, serverName: serverName) } catch { c.resume(returning: .failure(error)); return }
                conn.start(handler: probe)
                conn.write(Array(message.utf8))
                c.resume(returning: .success(conn))
            }
        }
    }
    return (probe, try result.get())
}

/// The rejection reason inside a close error, if it is one.
func rejection(_ e: NetError??) -> CertificateRejection.Reason? {
    if case .some(.some(.tls(.certificateRejected(let r)))) = e { return r.reason }
    return nil
}

/// TLS over real sockets: our client and server with certificates made at test time.
@Suite struct TLSTests {
    let pki = TestPKI()

    @Test func clientVerifiesChainAndHostThenEchoes() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = pki.server()
        let server = try await TLSEchoServer(group: group, .init(certificateChain: .file(id.certificatePath), privateKey: .pem(id.keyPEM)))
        let trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
        for name in ["localhost", "127.0.0.1"] {
            let (client, conn) = try await tlsConnect(port: server.port, on: group.loops[0], trust, serverName: name)
            let got = await client.collect(until: "hello")
            #expect(got.text == "hello", "echo via \(name)")
            #expect(client.version.withLock { $0 } == "TLSv1.3")
            #expect(client.peer.withLock { $0 }?.commonName == "localhost")
            // An orderly close: close_notify, and the server sees no error.
            // `TCPConnection` is Sendable (its methods run on its loop): no box needed.
            group.loops[0].execute { conn.close() }
            let serverSide = try #require(await server.next())
            let end = await serverSide.collect()
            #expect(end.closed == .some(nil), "orderly close seen by the server: \(String(describing: end.closed))")
        }
        await server.listener.close()
    }

    @Test(arguments: [
        ("expired", CertificateRejection.Reason.expired),
        ("not yet valid", .notYetValid),
        ("wrong host", .hostnameMismatch),
        ("other authority", .untrusted),
        ("self-signed", .untrusted),
        ("system trust", .untrusted),
        ("pin mismatch", .pinMismatch),
    ])
    func clientRefusesBadCertificates(_ case_: String, _ expected: CertificateRejection.Reason) async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let other = TestPKI(name: "Other CA")
        let id: TestIdentity
        var trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
        switch case_ {
        case "expired": id = pki.server(notBefore: -86_400 * 10, notAfter: -86_400)
        case "not yet valid": id = pki.server(notBefore: 86_400, notAfter: 86_400 * 10)
        case "wrong host": id = pki.server("wrong", hosts: ["other.example", "10.9.8.7"])
        case "other authority": id = other.server()
        case "self-signed": id = TestPKI.selfSigned(in: pki.dir)
        case "system trust": id = pki.server(); trust = TLSClientConfiguration()
        default:
            id = pki.server()
            let stranger = try TLSCertificate(pem: other.server().certificatePEM)
            trust.pins = [CertificatePin(.certificate, of: stranger)]
        }
        let server = try await TLSEchoServer(group: group, .init(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM)))
        let (client, _) = try await tlsConnect(port: server.port, on: group.loops[0], trust)
        let got = await client.collect()
        #expect(got.text.isEmpty, "no data crosses a refused handshake")
        #expect(rejection(got.closed) == expected, "\(case_): \(String(describing: got.closed))")
        await server.listener.close()
    }

    @Test func pinnedSelfSignedCertificateIsAcceptedByCertificateOrKey() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = TestPKI.selfSigned(in: pki.dir)
        let cert = try TLSCertificate(pem: id.certificatePEM)
        let server = try await TLSEchoServer(group: group, .init(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM)))
        for pin in [CertificatePin(.certificate, of: cert), CertificatePin(.publicKey, of: cert)] {
            let config = TLSClientConfiguration(trust: .pinnedCertificatesOnly, pins: [pin])
            let (client, _) = try await tlsConnect(port: server.port, on: group.loops[0], config)
            #expect(await client.collect(until: "hello").text == "hello", "\(pin)")
        }
        // Hex as `openssl x509 -fingerprint -sha256` prints it parses to the same pin.
        let hex = cert.sha256.map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(CertificatePin(.certificate, hex: hex) == CertificatePin(.certificate, of: cert))
        #expect(CertificatePin(.certificate, hex: "00:11") == nil)
        #expect(throws: TLSError.self) { try TLSContext(client: TLSClientConfiguration(trust: .pinnedCertificatesOnly)) }
    }

    @Test func mutualTLSAcceptsKnownClientsAndRefusesOthers() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = pki.server()
        var config = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM))
        config.clientAuthentication = .required(trusting: .pem(pki.ca.certificatePEM))
        let server = try await TLSEchoServer(group: group, config)
        let trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))

        // A client certificate from our authority: accepted, and the server knows who it is.
        let alice = pki.client("alice")
        var withIdentity = trust
        withIdentity.identity = TLSIdentity(certificateChain: .pem(alice.certificatePEM), privateKey: .file(alice.keyPath))
        let (client, _) = try await tlsConnect(port: server.port, on: group.loops[0], withIdentity)
        #expect(await client.collect(until: "hello").text == "hello")
        let accepted = try #require(await server.next())
        #expect(accepted.peer.withLock { $0 }?.commonName == "alice")

        // No certificate: the server refuses (certificate required), the client hears the alert.
        let (anonymous, _) = try await tlsConnect(port: server.port, on: group.loops[0], trust)
        let refused = await anonymous.collect()
        #expect(refused.text.isEmpty)
        if case .some(.some(.tls(.alertReceived(let alert)))) = refused.closed {
            #expect(alert.contains("certificate required"), "\(alert)")
        } else {
            Issue.record("expected an alert, got \(String(describing: refused.closed))")
        }
        let refusedOnServer = try #require(await server.next())
        #expect(rejection(await refusedOnServer.collect().closed) == .missing)

        // A certificate from another authority: refused as untrusted.
        let mallory = TestPKI(name: "Other CA").client("mallory")
        var stranger = trust
        stranger.identity = TLSIdentity(certificateChain: .pem(mallory.certificatePEM), privateKey: .pem(mallory.keyPEM))
        let (m, _) = try await tlsConnect(port: server.port, on: group.loops[0], stranger)
        #expect(await m.collect().text.isEmpty)
        let strangerOnServer = try #require(await server.next())
        #expect(rejection(await strangerOnServer.collect().closed) == .untrusted)
        await server.listener.close()
    }

    /// Garbage, a truncated record and a silent client are each closed with a typed error;
    /// a well-behaved client on the same server meanwhile is served normally.
    @Test func badTLSClientsAreClosedAndOthersAreUnaffected() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = pki.server()
        var config = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM))
        config.handshakeTimeout = 2  // the silent client waits this long; the others must fail sooner
        let server = try await TLSEchoServer(group: group, config)
        let loop = group.loops[0]
        let trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))

        // A good client first; it stays open throughout.
        let (good, goodConn) = try await tlsConnect(port: server.port, on: loop, trust, send: "one")
        #expect(await good.collect(until: "one").text == "one")
        let goodOnServer = try #require(await server.next())

        // Raw TCP clients misbehaving.
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        // A TLS record header announcing a 16 KiB handshake record, then only 10 bytes of it.
        let truncated: [UInt8] = [0x16, 0x03, 0x01, 0x40, 0x00] + [UInt8](repeating: 1, count: 10)
        for (name, bytes, halfClose) in [("garbage", garbage, false), ("truncated", truncated, true), ("silent", [], false)] {
            let probe = TLSProbe()
            let address = try await Resolver.resolve(host: "127.0.0.1", port: server.port)[0]
            // All on the loop, in the connect callback (see tlsConnect).
            let connected: NetError? = await withCheckedContinuation { c in
                TCPConnection.connect(to: address, on: loop) { r in
                    guard case .success(let raw) = r else { c.resume(returning: .connectionRefused); return }
                    raw.start(handler: probe)
                    if !bytes.isEmpty { raw.write(bytes) }
                    if halfClose { raw.shutdownOutput() }
                    c.resume(returning: nil)
                }
            }
            #expect(connected == nil)
            let onServer = try #require(await server.next())
            let closed = await onServer.collect().closed
            switch (name, closed) {
            case ("garbage", .some(.some(.tls(.handshakeFailed)))),
                 ("truncated", .some(.some(.tls(.unexpectedEOF)))),
                 ("silent", .some(.some(.tls(.handshakeTimedOut)))):
                break
            default:
                Issue.record("\(name): server closed with \(String(describing: closed))")
            }
            // The raw client sees its connection end (an alert at most, never data echoed).
            _ = await probe.collect()
        }

        // The good connection still works.
        loop.execute { goodConn.write(Array("two".utf8)) }
        #expect(await good.collect(until: "two").text == "two")
        // Cutting the TCP stream without close_notify is reported to the other side as truncation.
        loop.execute { goodConn.abort() }
        #expect(await goodOnServer.collect().closed == .some(.tls(.unexpectedEOF)))
        await server.listener.close()
    }

    @Test func bulkDataCrossesIntactBothWays() async throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdown() }
        let id = pki.server()
        let server = try await TLSEchoServer(group: group, .init(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM)))
        let big = String(repeating: "0123456789abcdef", count: 256 * 1024)  // 4 MiB
        let trust = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
        let (client, _) = try await tlsConnect(port: server.port, on: group.loops[1], trust, send: big + "END")
        let got = await client.collect(until: "END")
        #expect(got.text.count == big.count + 3 && got.text.hasPrefix(big))
        await server.listener.close()
    }
}

/// The `openssl` command-line tool, if installed.
let opensslTool: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Our TLS client and server against OpenSSL's own `s_server` and `s_client` tools.
@Suite(.enabled(if: opensslTool != nil, "needs the openssl command-line tool"))
struct OpenSSLToolInteropTests {
    let pki = TestPKI()

    /// Runs `openssl` with `args`, feeding `input` (then EOF: with -quiet, s_client still waits
    /// for the server to close); returns stdout.
    func openssl(_ args: [String], input: String) async throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: opensslTool ?? "openssl")
        p.arguments = args
        let stdin = Pipe(), stdout = Pipe()
        p.standardInput = stdin
        p.standardOutput = stdout
        p.standardError = FileHandle.nullDevice
        try p.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let out = await offPool { stdout.fileHandleForReading.readDataToEndOfFile() }
        await offPool { p.waitUntilExit() }
        return String(decoding: out, as: UTF8.self)
    }

    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func sClientAgainstOurServer(_ version: String) async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = pki.server()
        var config = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .pem(id.keyPEM))
        config.clientAuthentication = .optional(trusting: .pem(pki.ca.certificatePEM))
        let server = try await TLSEchoServer(group: group, config, closeAfterEcho: true)
        let carol = pki.client("carol")
        // s_client verifies our chain and host name (-verify_return_error makes a failure fatal),
        // presents a client certificate, sends a line; our server echoes it and then sees EOF.
        let out = try await openssl(["s_client", "-connect", "127.0.0.1:\(server.port)", version, "-quiet",
                                     "-verify_return_error", "-CAfile", pki.ca.certificatePath, "-verify_hostname", "localhost",
                                     "-cert", carol.certificatePath, "-key", carol.keyPath],
                                    input: "hello over \(version)\n")
        #expect(out == "hello over \(version)\n")
        let accepted = try #require(await server.next())
        #expect(accepted.version.withLock { $0 } == (version == "-tls1_2" ? "TLSv1.2" : "TLSv1.3"))
        #expect(accepted.peer.withLock { $0 }?.commonName == "carol")
        // TLS 1.0 and 1.1 are refused.
        let old = try await openssl(["s_client", "-connect", "127.0.0.1:\(server.port)", "-tls1_1", "-quiet"], input: "x\n")
        #expect(old.isEmpty)
        await server.listener.close()
    }

    @Test func ourClientAgainstSServer() async throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let id = pki.server()
        let p = Process()
        // stdbuf: s_server prints its port through stdio, block-buffered into a pipe otherwise.
        p.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
        // -rev: answers each line reversed (an echo that proves the bytes went through OpenSSL).
        p.arguments = ["-oL", opensslTool ?? "openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", id.certificatePath, "-key", id.keyPath, "-rev"]
        let stdout = Pipe()
        p.standardOutput = stdout
        p.standardError = FileHandle.nullDevice
        try p.run()
        // SIGKILL: s_server outlives SIGTERM while a client is connected.
        defer { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        // "ACCEPT 127.0.0.1:<port>"
        let handle = stdout.fileHandleForReading
        let line = await offPool { () -> String in
            while true {
                var bytes: [UInt8] = []
                while let b = try? handle.read(upToCount: 1), let c = b.first, c != 10 { bytes.append(c) }
                let line = String(decoding: bytes, as: UTF8.self)
                if line.hasPrefix("ACCEPT") || bytes.isEmpty { return line }
            }
        }
        let port = try #require(Int(line.split(separator: ":").last ?? ""), "s_server said \(line)")
        let trust = TLSClientConfiguration(trust: .certificateAuthorities(.file(pki.ca.certificatePath)))
        let (client, _) = try await tlsConnect(port: port, on: group.loops[0], trust, send: "stressed\n")
        #expect(await client.collect(until: "\n").text == "desserts\n")
        #expect(client.peer.withLock { $0 }?.commonName == "localhost")
    }
}
