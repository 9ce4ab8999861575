/// The permessage-deflate handshake (RFC 7692 §5, §7.1): the client's offer, the server's
/// choice among offers, and the client's check of the server's response.
@_spi(Fuzzing) public enum PerMessageDeflateNegotiation {
    /// The client's `Sec-WebSocket-Extensions` value for `options`. It always carries
    /// `client_max_window_bits` (bare at 15: "I support the parameter").
    public static func clientOffer(_ options: PerMessageDeflateOptions) -> String {
        var p = PerMessageDeflateParameters()
        p.serverNoContextTakeover = options.serverNoContextTakeover
        p.clientNoContextTakeover = options.clientNoContextTakeover
        let serverBits = PerMessageDeflateOptions.clampBits(options.serverMaxWindowBits)
        if serverBits < 15 { p.serverMaxWindowBits = serverBits }
        p.clientMaxWindowBitsPresent = true
        let clientBits = PerMessageDeflateOptions.clampBits(options.clientMaxWindowBits)
        if clientBits < 15 { p.clientMaxWindowBits = clientBits }
        return p.element.headerValue
    }

    /// The server's choice: the first permessage-deflate offer in `fieldValues` whose
    /// parameters are valid, answered with our `options` applied. Returns the response header
    /// value and the agreement, or nil to answer without the extension (no offer, a malformed
    /// header, or no valid offer).
    public static func serverAccept(offers fieldValues: [String], options: PerMessageDeflateOptions)
        -> (header: String, agreement: PerMessageDeflateAgreement)? {
        guard !fieldValues.isEmpty, let offers = try? ExtensionOffer.parse(fieldValues) else { return nil }
        for element in offers where element.name == PerMessageDeflateParameters.extensionName {
            guard let offer = try? PerMessageDeflateParameters(element, isResponse: false) else { continue }
            var r = PerMessageDeflateParameters()
            r.serverNoContextTakeover = offer.serverNoContextTakeover || options.serverNoContextTakeover
            r.clientNoContextTakeover = offer.clientNoContextTakeover || options.clientNoContextTakeover
            let ourServerBits = PerMessageDeflateOptions.clampBits(options.serverMaxWindowBits)
            if let asked = offer.serverMaxWindowBits {
                r.serverMaxWindowBits = min(asked, ourServerBits)
            } else if ourServerBits < 15 {
                r.serverMaxWindowBits = ourServerBits
            }
            // client_max_window_bits may be answered only when offered (§7.1.2.2).
            let ourClientBits = PerMessageDeflateOptions.clampBits(options.clientMaxWindowBits)
            if offer.clientMaxWindowBitsPresent && ourClientBits < 15 {
                r.clientMaxWindowBitsPresent = true
                r.clientMaxWindowBits = min(offer.clientMaxWindowBits ?? 15, ourClientBits)
            }
            return (r.element.headerValue, PerMessageDeflateAgreement(role: .server, response: r, options: options))
        }
        return nil
    }

    /// The client's check of the response's `Sec-WebSocket-Extensions` fields against the offer
    /// made with `options` (nil: nothing was offered). Returns nil when the server declined;
    /// throws for a response the client must fail the connection on (RFC 7692 §5, §7.1).
    public static func clientAccept(response fieldValues: [String], offered options: PerMessageDeflateOptions?)
        throws(ExtensionNegotiationError) -> PerMessageDeflateAgreement? {
        let elements = try ExtensionOffer.parse(fieldValues)
        guard let element = elements.first else { return nil }
        guard let options else { throw .unexpectedExtension(element.name) }
        guard element.name == PerMessageDeflateParameters.extensionName else { throw .unexpectedExtension(element.name) }
        guard elements.count == 1 else { throw .unexpectedExtension("\(elements.count) extensions in the response") }
        let r = try PerMessageDeflateParameters(element, isResponse: true)
        let offeredServerBits = PerMessageDeflateOptions.clampBits(options.serverMaxWindowBits)
        if let b = r.serverMaxWindowBits, offeredServerBits < 15, b > offeredServerBits {
            throw .notAllowed("server_max_window_bits=\(b) above the \(offeredServerBits) offered")
        }
        let offeredClientBits = PerMessageDeflateOptions.clampBits(options.clientMaxWindowBits)
        if let b = r.clientMaxWindowBits, b > offeredClientBits {
            throw .notAllowed("client_max_window_bits=\(b) above the \(offeredClientBits) offered")
        }
        return PerMessageDeflateAgreement(role: .client, response: r, options: options)
    }
}
