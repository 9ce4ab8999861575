// A wss:// echo server and a client in one process: the TLS options of FerryWebSocket in a
// runnable form (docs/transport.md). Usage: wss-echo-example CERT.pem KEY.pem — a certificate
// for "localhost" (self-signed is fine: the client pins it). scripts/test makes one with the
// openssl tool and runs this.
import FerryNet
import FerryWebSocket
import Foundation

let args = CommandLine.arguments
guard args.count == 3 else {
    print("usage: wss-echo-example CERT.pem KEY.pem")
    exit(2)
}
let (certPath, keyPath) = (args[1], args[2])

// Server: a certificate chain and key from PEM files (or `.pem(String)` from memory).
let serverTLS = try TLSContext(server: TLSServerConfiguration(certificateChain: .file(certPath), privateKey: .file(keyPath)))
let server = try await WebSocketServer.bind(host: "127.0.0.1", port: 0, tls: serverTLS)
let echo = Task {
    for await ws in server.connections {
        Task { for try await message in ws.messages { try await ws.send(message) } }
    }
}

// Client: trust exactly this certificate by its SHA-256 (peer-to-peer with self-signed
// certificates). With a CA-issued certificate use `.certificateAuthorities(.file(…))`, or the
// default `TLSClientConfiguration()` for the system trust store; host names are checked then.
guard let pem = try? String(contentsOfFile: certPath, encoding: .utf8) else { fatalError("cannot read \(certPath)") }
let pin = CertificatePin(.certificate, of: try TLSCertificate(pem: pem))
let clientTLS = try TLSContext(client: TLSClientConfiguration(trust: .pinnedCertificatesOnly, pins: [pin]))
let ws = try await WebSocket.connect(to: "wss://localhost:\(server.port)/", tls: clientTLS)
try await ws.send(text: "hello over TLS")
let reply = try await ws.receive()
print("server certificate: \(ws.peerCertificate?.subject ?? "?")")
print("echo: \(reply.map { "\($0)" } ?? "nothing")")
_ = await ws.close()

// A wrong pin is refused before any byte of the application crosses.
let wrong = try TLSContext(client: TLSClientConfiguration(trust: .pinnedCertificatesOnly,
                                                          pins: [CertificatePin(.certificate, sha256: [UInt8](repeating: 0, count: 32))]))
do {
    _ = try await WebSocket.connect(to: "wss://localhost:\(server.port)/", tls: wrong)
    print("unexpected: a wrong pin was accepted")
    exit(1)
} catch {
    print("wrong pin refused: \(error)")
}
await server.close()
echo.cancel()
