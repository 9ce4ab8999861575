@_spi(Fuzzing) @testable import FerryWebSocket
import Testing

/// `Sec-WebSocket-Extensions` parsing and permessage-deflate negotiation (RFC 6455 §9.1,
/// RFC 7692 §5, §7.1), both roles, without sockets.
@Suite struct ExtensionNegotiationTests {
    typealias P = ExtensionOffer.Parameter

    @Test func parsesListsParametersAndQuotedValues() throws {
        let offers = try ExtensionOffer.parse([
            "permessage-deflate; client_max_window_bits; server_max_window_bits=10, permessage-deflate",
            " Permessage-Deflate ;SERVER_MAX_WINDOW_BITS = \"12\" ,, x-custom; a=\"q\\\"d\"",
        ])
        #expect(offers == [
            ExtensionOffer(name: "permessage-deflate", parameters: [P(name: "client_max_window_bits"), P(name: "server_max_window_bits", value: "10")]),
            ExtensionOffer(name: "permessage-deflate"),
            ExtensionOffer(name: "permessage-deflate", parameters: [P(name: "server_max_window_bits", value: "12")]),
            ExtensionOffer(name: "x-custom", parameters: [P(name: "a", value: "q\"d")]),
        ])
        #expect(try ExtensionOffer.parse([""]) == [])
        #expect(offers[0].headerValue == "permessage-deflate; client_max_window_bits; server_max_window_bits=10")
    }

    @Test(arguments: ["; client_max_window_bits", "permessage-deflate;", "permessage-deflate; =1", "permessage deflate",
                      "permessage-deflate; a=", "permessage-deflate; a=\"open", "permessage-deflate; a=b c", "permessage-deflate; a=\"\u{1}\"",
                      "permessage-deflate; a=(b)"])
    func refusesMalformedHeaders(_ header: String) {
        #expect(throws: ExtensionNegotiationError.self) { try ExtensionOffer.parse([header]) }
    }

    @Test func validatesParameters() throws {
        func params(_ h: String, response: Bool = false) throws(ExtensionNegotiationError) -> PerMessageDeflateParameters {
            try PerMessageDeflateParameters(ExtensionOffer.parse([h])[0], isResponse: response)
        }
        let p = try params("permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=9; client_max_window_bits")
        #expect(p.serverNoContextTakeover && p.clientNoContextTakeover && p.serverMaxWindowBits == 9)
        #expect(p.clientMaxWindowBitsPresent && p.clientMaxWindowBits == nil)
        #expect(try params("permessage-deflate; client_max_window_bits=\"8\"").clientMaxWindowBits == 8)
        #expect(throws: ExtensionNegotiationError.duplicateParameter("server_no_context_takeover")) {
            try params("permessage-deflate; server_no_context_takeover; server_no_context_takeover")
        }
        #expect(throws: ExtensionNegotiationError.duplicateParameter("client_max_window_bits")) {
            try params("permessage-deflate; client_max_window_bits; client_max_window_bits=10")
        }
        #expect(throws: ExtensionNegotiationError.unknownParameter("x")) { try params("permessage-deflate; x") }
        for bad in ["server_max_window_bits", "server_max_window_bits=7", "server_max_window_bits=16", "server_max_window_bits=010",
                    "server_max_window_bits=+9", "client_max_window_bits=abc", "server_no_context_takeover=1",
                    "client_no_context_takeover=\"\""] {
            #expect(throws: ExtensionNegotiationError.self, "\(bad)") { try params("permessage-deflate; \(bad)") }
        }
        // In a response client_max_window_bits needs its value.
        #expect(throws: ExtensionNegotiationError.invalidValue(parameter: "client_max_window_bits", value: nil)) {
            try params("permessage-deflate; client_max_window_bits", response: true)
        }
    }

    @Test func clientOfferCarriesTheOptions() {
        #expect(PerMessageDeflateNegotiation.clientOffer(PerMessageDeflateOptions()) == "permessage-deflate; client_max_window_bits")
        let o = PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true, serverMaxWindowBits: 10, clientMaxWindowBits: 4)
        #expect(PerMessageDeflateNegotiation.clientOffer(o)
                == "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=8")
    }

    @Test func serverPicksTheFirstOfferItCanHonour() throws {
        let accept = { (offers: [String], options: PerMessageDeflateOptions) in
            PerMessageDeflateNegotiation.serverAccept(offers: offers, options: options)?.header
        }
        let plain = PerMessageDeflateOptions()
        #expect(accept([], plain) == nil)
        #expect(accept(["x-webkit-deflate-frame"], plain) == nil)
        #expect(accept(["permessage-deflate; bogus"], plain) == nil)
        #expect(accept(["permessage-deflate; ,"], plain) == nil, "a malformed header declines every offer")
        #expect(accept(["permessage-deflate"], plain) == "permessage-deflate")
        // Invalid offers are skipped; the first valid one wins.
        #expect(accept(["permessage-deflate; server_max_window_bits=99, x-other, permessage-deflate; server_max_window_bits=10",
                        "permessage-deflate"], plain) == "permessage-deflate; server_max_window_bits=10")
        #expect(accept(["permessage-deflate; server_no_context_takeover; client_no_context_takeover"], plain)
                == "permessage-deflate; server_no_context_takeover; client_no_context_takeover")
        // Our limits: the smaller window wins; client_max_window_bits only when offered.
        let tight = PerMessageDeflateOptions(serverNoContextTakeover: true, serverMaxWindowBits: 11, clientMaxWindowBits: 9)
        #expect(accept(["permessage-deflate; server_max_window_bits=13; client_max_window_bits"], tight)
                == "permessage-deflate; server_no_context_takeover; server_max_window_bits=11; client_max_window_bits=9")
        #expect(accept(["permessage-deflate; server_max_window_bits=8; client_max_window_bits=12"], tight)
                == "permessage-deflate; server_no_context_takeover; server_max_window_bits=8; client_max_window_bits=9")
        #expect(accept(["permessage-deflate"], tight) == "permessage-deflate; server_no_context_takeover; server_max_window_bits=11")
        let agreement = try #require(PerMessageDeflateNegotiation.serverAccept(
            offers: ["permessage-deflate; client_max_window_bits; client_no_context_takeover"], options: tight)?.agreement)
        #expect(agreement.sendNoContextTakeover && agreement.sendMaxWindowBits == 11)
        #expect(agreement.receiveNoContextTakeover && agreement.receiveMaxWindowBits == 9)
    }

    @Test func clientChecksTheResponse() throws {
        let offered = PerMessageDeflateOptions(serverMaxWindowBits: 10, clientMaxWindowBits: 12)
        func accept(_ fields: [String], _ options: PerMessageDeflateOptions? = offered) throws(ExtensionNegotiationError) -> PerMessageDeflateAgreement? {
            try PerMessageDeflateNegotiation.clientAccept(response: fields, offered: options)
        }
        #expect(try accept([]) == nil)
        let a = try #require(try accept(["permessage-deflate; server_max_window_bits=9; client_max_window_bits=11; client_no_context_takeover"]))
        #expect(a.receiveMaxWindowBits == 9 && a.sendMaxWindowBits == 11 && a.sendNoContextTakeover && !a.receiveNoContextTakeover)
        let b = try #require(try accept(["permessage-deflate"]))
        #expect(b.receiveMaxWindowBits == 15 && b.sendMaxWindowBits == 12)
        for bad in [["permessage-deflate; server_max_window_bits=11"],          // larger than offered
                    ["permessage-deflate; client_max_window_bits=13"],          // larger than offered
                    ["permessage-deflate; client_max_window_bits"],             // no value in a response
                    ["permessage-deflate; server_no_context_takeover; server_no_context_takeover"],
                    ["permessage-deflate; mystery"],
                    ["x-webkit-deflate-frame"],
                    ["permessage-deflate", "permessage-deflate"],
                    ["permessage-deflate; server_max_window_bits=\"1 0\""],
                    ["permessage-deflate;;"]] {
            #expect(throws: ExtensionNegotiationError.self, "\(bad)") { try accept(bad) }
        }
        // Nothing offered: any extension in the response fails.
        #expect(throws: ExtensionNegotiationError.self) { try accept(["permessage-deflate"], nil) }
        // With the default options there is no server window to exceed.
        #expect(try accept(["permessage-deflate; server_max_window_bits=15"], PerMessageDeflateOptions())?.receiveMaxWindowBits == 15)
    }

    @Test func clientHandshakeFailsOnABadExtensionResponse() throws {
        let hs = ClientHandshake(permessageDeflate: PerMessageDeflateOptions(), key: "dGhlIHNhbXBsZSBub25jZQ==")
        let head = { (ext: String) in
            try ClientHandshake.parseResponse(Array(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: \(ext)\r\n\r\n").utf8))
        }
        #expect(try hs.negotiatedDeflate(head("permessage-deflate; client_max_window_bits=9"))?.sendMaxWindowBits == 9)
        for bad in ["permessage-deflate; client_max_window_bits", "permessage-deflate; foo=bar", "deflate-frame"] {
            #expect(throws: WebSocketError.self, "\(bad)") { try hs.validate(head(bad)) }
        }
        // Without an offer, any extension fails the handshake as before.
        #expect(throws: WebSocketError.self) {
            try ClientHandshake(key: "dGhlIHNhbXBsZSBub25jZQ==").validate(head("permessage-deflate"))
        }
    }
}
