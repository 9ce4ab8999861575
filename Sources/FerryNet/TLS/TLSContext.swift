import COpenSSL

/// A configured OpenSSL context (`SSL_CTX`) for one role: certificates, trust and versions
/// loaded once, shared by every connection made with it. TLS 1.2 and 1.3 only.
///
/// Safety of `@unchecked Sendable`: the `SSL_CTX` is fully configured in `init` and afterwards
/// only used to create sessions (`SSL_new`), which OpenSSL allows from any thread concurrently;
/// the Swift properties are immutable.
public final class TLSContext: @unchecked Sendable {
    /// Which side of the handshake the context is for.
    public enum Role: Sendable { case client, server }

    let ctx: OpaquePointer
    /// The side of the handshake.
    public let role: Role
    /// Seconds a handshake may take.
    public let handshakeTimeout: Double
    /// Client settings (nil for a server context).
    let client: TLSClientConfiguration?

    /// A server context: loads the certificate chain and key, and the client CA bundle when
    /// client certificates are asked for. Throws `.configuration` with the reason.
    public init(server configuration: TLSServerConfiguration) throws(TLSError) {
        role = .server
        client = nil
        handshakeTimeout = configuration.handshakeTimeout
        ctx = try Self.makeContext(TLS_server_method())
        do throws(TLSError) {
            try Self.useIdentity(configuration.identity, in: ctx)
            switch configuration.clientAuthentication {
            case .none:
                break
            case .optional(let ca), .required(let ca):
                let required: Bool
                if case .required = configuration.clientAuthentication { required = true } else { required = false }
                try Self.trust(ca, in: ctx, advertise: true)
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (required ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nil)
            }
            // Needed whenever peers are verified, or session resumption fails the handshake.
            let sid: [UInt8] = Array("ferry".utf8)
            _ = SSL_CTX_set_session_id_context(ctx, sid, UInt32(sid.count))
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
    }

    /// A client context: the trust settings, pins and optional client identity.
    public init(client configuration: TLSClientConfiguration = TLSClientConfiguration()) throws(TLSError) {
        role = .client
        client = configuration
        handshakeTimeout = configuration.handshakeTimeout
        if configuration.trust == .pinnedCertificatesOnly && configuration.pins.isEmpty {
            throw .configuration("pinnedCertificatesOnly needs at least one pin")
        }
        ctx = try Self.makeContext(TLS_client_method())
        do throws(TLSError) {
            switch configuration.trust {
            case .systemDefault:
                guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                    throw .configuration("cannot load the system trust store: \(PEMLoader.takeErrors())")
                }
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
            case .certificateAuthorities(let ca):
                try Self.trust(ca, in: ctx, advertise: false)
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
            case .pinnedCertificatesOnly, .insecureAcceptAnyCertificate:
                // Checked after the handshake by the pins (or not at all).
                SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
            }
            if let identity = configuration.identity { try Self.useIdentity(identity, in: ctx) }
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
    }

    deinit { SSL_CTX_free(ctx) }

    /// Whether the chain is verified by OpenSSL during the handshake (so host names apply).
    var verifiesChain: Bool {
        guard let client else { return true }
        switch client.trust {
        case .systemDefault, .certificateAuthorities: return true
        case .pinnedCertificatesOnly, .insecureAcceptAnyCertificate: return false
        }
    }

    private static func makeContext(_ method: OpaquePointer?) throws(TLSError) -> OpaquePointer {
        guard let ctx = SSL_CTX_new(method) else { throw .configuration("SSL_CTX_new: \(PEMLoader.takeErrors())") }
        guard ferry_ssl_ctx_set_tls12_to_13(ctx) == 1 else {
            SSL_CTX_free(ctx)
            throw .configuration("cannot restrict to TLS 1.2–1.3")
        }
        // Idle connections give their record buffers back (memory per idle connection).
        _ = ferry_ssl_ctx_set_mode(ctx, ferry_ssl_mode_release_buffers())
        return ctx
    }

    private static func useIdentity(_ identity: TLSIdentity, in ctx: OpaquePointer) throws(TLSError) {
        let chain = try PEMLoader.certificates(identity.certificateChain)
        defer { chain.forEach { X509_free($0) } }
        guard SSL_CTX_use_certificate(ctx, chain[0]) == 1 else {
            throw .configuration("certificate rejected: \(PEMLoader.takeErrors())")
        }
        for extra in chain.dropFirst() where ferry_ssl_ctx_add1_chain_cert(ctx, extra) != 1 {
            throw .configuration("chain certificate rejected: \(PEMLoader.takeErrors())")
        }
        let key = try PEMLoader.privateKey(identity.privateKey)
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(ctx, key) == 1, SSL_CTX_check_private_key(ctx) == 1 else {
            throw .configuration("the private key does not match the certificate: \(PEMLoader.takeErrors())")
        }
    }

    private static func trust(_ bundle: PEMSource, in ctx: OpaquePointer, advertise: Bool) throws(TLSError) {
        let cas = try PEMLoader.certificates(bundle)
        defer { cas.forEach { X509_free($0) } }
        let store = SSL_CTX_get_cert_store(ctx)
        for ca in cas {
            guard X509_STORE_add_cert(store, ca) == 1 else {
                throw .configuration("CA certificate rejected: \(PEMLoader.takeErrors())")
            }
            // Tells clients which authorities we accept, so they pick the right identity.
            if advertise { _ = SSL_CTX_add_client_CA(ctx, ca) }
        }
    }
}

extension TLSContext {
    /// The client context used when none is given: the system trust store, host names
    /// checked, no client certificate. Made once, on first use.
    public static let defaultClientResult: Result<TLSContext?, TLSError> = {
        do throws(TLSError) { return .success(try TLSContext(client: TLSClientConfiguration())) } catch { return .failure(error) }
    }()
}
