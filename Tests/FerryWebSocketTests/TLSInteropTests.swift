import FerryNet
import FerryTestSupport
@testable import FerryWebSocket
import Foundation
import Testing

/// `wss://` against Python's `websockets` + `ssl` in both roles, with certificates made at test
/// time: verified chains and host names, mutual TLS accepted and refused, pinning accepted and
/// refused, expired and wrong-host certificates refused with a typed error.
@Suite(.serialized, .enabled(if: interopPython != nil, "needs Python with websockets: run scripts/test or set FERRY_PYTHON"))
struct TLSInteropTests {
    let pki = TestPKI()

    /// Starts the Python wss echo server with `id`; returns it and its port.
    func pythonServer(_ id: TestIdentity, clientCA: String? = nil) async throws -> (PythonPeer, Int) {
        var args = ["server", "--cert", id.certificatePath, "--key", id.keyPath]
        if let clientCA { args += ["--client-ca", clientCA] }
        let peer = try PythonPeer(script: "wss_peer.py", arguments: args)
        let line = await offPool { peer.readLine() }
        let port = try #require(line.flatMap { Int($0.replacingOccurrences(of: "PORT ", with: "")) })
        return (peer, port)
    }

    /// Connects, sends `whoami`, returns the reply or the error.
    func whoami(_ url: String, _ tls: TLSClientConfiguration) async -> Result<String, WebSocketError> {
        do {
            let context = try TLSContext(client: tls)
            let ws = try await WebSocket.connect(to: url, tls: context)
            try await ws.send(text: "whoami")
            let reply = try await ws.receive()
            _ = await ws.close()
            if case .text(let t)? = reply { return .success(t) }
            return .success("?")
        } catch let e as WebSocketError {
            return .failure(e)
        } catch {
            return .failure(.transport(.tls(error as? TLSError ?? .configuration("\(error)"))))
        }
    }

    func rejection(_ r: Result<String, WebSocketError>) -> CertificateRejection.Reason? {
        if case .failure(.transport(.tls(.certificateRejected(let why)))) = r { return why.reason }
        return nil
    }

    @Test func ferryClientAgainstPythonServer() async throws {
        let good = pki.server()
        let trustCA = TLSClientConfiguration(trust: .certificateAuthorities(.file(pki.ca.certificatePath)))
        let (peer, port) = try await pythonServer(good)
        defer { peer.terminate() }
        // Chain verified, host name checked (DNS name and IP address both in the certificate).
        #expect(try await whoami("wss://localhost:\(port)/", trustCA).get() == "anonymous")
        #expect(try await whoami("wss://127.0.0.1:\(port)/", trustCA).get() == "anonymous")
        // Pinning: accepted by the right certificate or key digest, refused otherwise.
        let cert = try TLSCertificate(pem: good.certificatePEM)
        #expect(try await whoami("wss://localhost:\(port)/", TLSClientConfiguration(trust: .pinnedCertificatesOnly, pins: [CertificatePin(.publicKey, of: cert)])).get() == "anonymous")
        var pinned = trustCA
        pinned.pins = [CertificatePin(.certificate, of: cert)]
        #expect(try await whoami("wss://localhost:\(port)/", pinned).get() == "anonymous")
        pinned.pins = [CertificatePin(.certificate, sha256: [UInt8](repeating: 7, count: 32))]
        #expect(rejection(await whoami("wss://localhost:\(port)/", pinned)) == .pinMismatch)
        // The system trust store does not know our test authority.
        #expect(rejection(await whoami("wss://localhost:\(port)/", TLSClientConfiguration())) == .untrusted)

        // Expired and wrong-host certificates are refused with the reason.
        for (id, reason) in [(pki.server("expired", notBefore: -86_400 * 30, notAfter: -86_400), CertificateRejection.Reason.expired),
                             (pki.server("wronghost", hosts: ["elsewhere.example"]), .hostnameMismatch)] {
            let (bad, badPort) = try await pythonServer(id)
            defer { bad.terminate() }
            #expect(rejection(await whoami("wss://localhost:\(badPort)/", trustCA)) == reason)
        }
    }

    @Test func ferryClientWithMutualTLS() async throws {
        let (peer, port) = try await pythonServer(pki.server(), clientCA: pki.ca.certificatePath)
        defer { peer.terminate() }
        var tls = TLSClientConfiguration(trust: .certificateAuthorities(.pem(pki.ca.certificatePEM)))
        let alice = pki.client("alice")
        tls.identity = TLSIdentity(certificateChain: .file(alice.certificatePath), privateKey: .file(alice.keyPath))
        #expect(try await whoami("wss://localhost:\(port)/", tls).get() == "alice")
        // Without a client certificate the server refuses; we report its alert, typed.
        tls.identity = nil
        let refused = await whoami("wss://localhost:\(port)/", tls)
        guard case .failure(.transport(.tls(let e))) = refused else {
            Issue.record("expected a TLS error, got \(refused)")
            return
        }
        switch e {
        case .alertReceived, .unexpectedEOF: break
        default: Issue.record("unexpected TLS error \(e)")
        }
    }

    /// Runs the Python client against `url`; returns its output lines and exit status.
    func pythonClient(_ url: String, ca: String, identity: TestIdentity? = nil, serverName: String? = nil) async throws -> (Int32, String) {
        var args = ["client", "--url", url, "--ca", ca]
        if let identity { args += ["--cert", identity.certificatePath, "--key", identity.keyPath] }
        if let serverName { args += ["--server-name", serverName] }
        let peer = try PythonPeer(script: "wss_peer.py", arguments: args)
        let (status, output) = await offPool { peer.finish() }
        return (status, output)
    }

    @Test func pythonClientAgainstFerryServer() async throws {
        for mutual in [false, true] {
            let id = pki.server()
            var config = TLSServerConfiguration(certificateChain: .pem(id.certificatePEM), privateKey: .file(id.keyPath))
            if mutual { config.clientAuthentication = .required(trusting: .file(pki.ca.certificatePath)) }
            let server = try await WebSocketServer.bind(port: 0, tls: try TLSContext(server: config))
            let serving = Task {
                for await ws in server.connections {
                    Task {
                        for try await m in ws.messages {
                            if m == .text("whoami") {
                                // The upgrade request carries the client's certificate.
                                try await ws.send(text: ws.peerCertificate?.commonName ?? "anonymous")
                            } else {
                                try await ws.send(m)
                            }
                        }
                    }
                }
            }
            let url = "wss://localhost:\(server.port)/"
            if mutual {
                let (status, out) = try await pythonClient(url, ca: pki.ca.certificatePath, identity: pki.client("bob"))
                #expect(status == 0 && out == "OK hello\nOK bob\n", "\(out)")
                let (refusedStatus, refused) = try await pythonClient(url, ca: pki.ca.certificatePath)
                #expect(refusedStatus == 1 && refused.hasPrefix("ERROR"), "\(refused)")
                let otherCA = TestPKI(name: "Other CA")  // kept alive: its folder holds the files
                let (strangerStatus, strangerOut) = try await pythonClient(url, ca: pki.ca.certificatePath, identity: otherCA.client("mallory"))
                #expect(strangerStatus == 1 && strangerOut.hasPrefix("ERROR"), "\(strangerOut)")
                withExtendedLifetime(otherCA) {}
            } else {
                let (status, out) = try await pythonClient(url, ca: pki.ca.certificatePath)
                #expect(status == 0 && out == "OK hello\nOK anonymous\n", "\(out)")
                // Python checks our certificate against the name it connects to.
                let (wrongStatus, wrong) = try await pythonClient(url, ca: pki.ca.certificatePath, serverName: "elsewhere.example")
                #expect(wrongStatus == 1 && wrong.contains("SSLCertVerificationError"), "\(wrong)")
            }
            await server.close()
            serving.cancel()
        }
    }
}
