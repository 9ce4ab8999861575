import ArgumentParser
import FerryNet

/// `--tls-cert/--tls-key/--client-ca`: serve `wss://` (and optionally require client certificates).
struct ServerTLSOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Serve wss:// with this certificate chain (PEM, leaf first). Needs --tls-key.", valueName: "pem"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("The private key of --tls-cert (PEM, unencrypted).", valueName: "pem"))
    var tlsKey: String?
    @Option(help: ArgumentHelp("Require client certificates issued by these authorities (PEM bundle).", valueName: "pem"))
    var clientCa: String?

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if clientCa != nil && tlsCert == nil { throw ValidationError("--client-ca needs --tls-cert and --tls-key") }
    }

    /// The listener's TLS settings, or nil for plain ws://.
    var configuration: TLSServerConfiguration? {
        guard let tlsCert, let tlsKey else { return nil }
        var c = TLSServerConfiguration(certificateChain: .file(tlsCert), privateKey: .file(tlsKey))
        if let clientCa { c.clientAuthentication = .required(trusting: .file(clientCa)) }
        return c
    }
}

/// `--ca/--pin/--client-cert/--client-key`: how a wss:// peer is verified, and who we are.
struct ClientTLSOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Trust wss:// peers whose certificates chain to these authorities (PEM bundle) instead of the system store.", valueName: "pem"))
    var ca: String?
    @Option(help: ArgumentHelp("Accept the peer's certificate if its SHA-256 (hex, colons allowed, as `openssl x509 -fingerprint -sha256` prints) matches; repeatable. Without --ca, pins alone decide (self-signed peers).", valueName: "sha256"))
    var pin: [String] = []
    @Option(help: ArgumentHelp("Present this certificate (PEM) to peers that require one. Needs --client-key.", valueName: "pem"))
    var clientCert: String?
    @Option(help: ArgumentHelp("The private key of --client-cert.", valueName: "pem"))
    var clientKey: String?

    func validate() throws {
        if (clientCert == nil) != (clientKey == nil) { throw ValidationError("--client-cert and --client-key go together") }
        for p in pin where CertificatePin(.certificate, hex: p) == nil {
            throw ValidationError("--pin \(p) is not a SHA-256 digest (64 hex digits)")
        }
    }

    /// The replicator's TLS settings.
    var configuration: TLSClientConfiguration {
        var c = TLSClientConfiguration()
        c.pins = pin.compactMap { CertificatePin(.certificate, hex: $0) }
        if let ca { c.trust = .certificateAuthorities(.file(ca)) } else if !c.pins.isEmpty { c.trust = .pinnedCertificatesOnly }
        if let clientCert, let clientKey {
            c.identity = TLSIdentity(certificateChain: .file(clientCert), privateKey: .file(clientKey))
        }
        return c
    }
}
