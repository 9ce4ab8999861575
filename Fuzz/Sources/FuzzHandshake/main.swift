@_spi(Fuzzing) import FerryWebSocket
import FuzzSupport

// Feeds arbitrary bytes to FerryHTTP's head accumulator (in two pieces) and, when a head comes out,
// to the request and response parsers and the server/client handshake validators, including
// permessage-deflate negotiation on both sides. The whole input is also parsed as a
// Sec-WebSocket-Extensions value.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let split = Int(data[0]) % max(1, size)
    let body = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    ExtensionProbe.check([String(decoding: body, as: UTF8.self)])
    var parser = HTTPHeadAccumulator(maxSize: 4096)
    let cut = min(split, body.count)
    var head: ArraySlice<UInt8>?
    for part in [UnsafeRawBufferPointer(rebasing: body[..<cut]), UnsafeRawBufferPointer(rebasing: body[cut...])] {
        guard head == nil else { break }
        do { head = try parser.feed(part)?.head } catch { return 0 }
    }
    guard let head else { return 0 }
    if let req = try? ServerHandshake.parseRequest(head) {
        _ = try? ServerHandshake.validate(req)
        _ = UpgradeRequestProbe.negotiate(req)
        let offers = req.values(of: "Sec-WebSocket-Extensions")
        ExtensionProbe.check(offers)
        for options in ExtensionProbe.options {
            guard let accepted = PerMessageDeflateNegotiation.serverAccept(offers: offers, options: options) else { continue }
            // What our server answers is always a valid response.
            let elements = try? ExtensionOffer.parse([accepted.header])
            precondition(elements?.count == 1, "server answer does not parse: \(accepted.header)")
            precondition((try? PerMessageDeflateParameters(elements![0], isResponse: true)) == accepted.agreement.response,
                         "server answer does not validate: \(accepted.header)")
        }
    }
    if let resp = try? ClientHandshake.parseResponse(head) {
        _ = try? ClientHandshake(subprotocols: ["BLIP_3+CBMobile_3"], key: "dGhlIHNhbXBsZSBub25jZQ==").validate(resp)
        for options in ExtensionProbe.options {
            let hs = ClientHandshake(permessageDeflate: options, key: "dGhlIHNhbXBsZSBub25jZQ==")
            _ = try? hs.validate(resp)
            if let a = try? hs.negotiatedDeflate(resp) {
                precondition((8...15).contains(a.sendMaxWindowBits) && (8...15).contains(a.receiveMaxWindowBits))
            }
        }
    }
    return 0
}

enum ExtensionProbe {
    static let options = [PerMessageDeflateOptions(),
                          PerMessageDeflateOptions(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                   serverMaxWindowBits: 9, clientMaxWindowBits: 10)]

    /// Parses `fields` as Sec-WebSocket-Extensions; every permessage-deflate element that
    /// validates must survive being written out and parsed again.
    static func check(_ fields: [String]) {
        guard let elements = try? ExtensionOffer.parse(fields) else { return }
        for e in elements {
            for isResponse in [false, true] {
                guard let p = try? PerMessageDeflateParameters(e, isResponse: isResponse) else { continue }
                let again = try? ExtensionOffer.parse([p.element.headerValue])
                precondition(again?.count == 1, "re-parse of \(p.element.headerValue)")
                precondition((try? PerMessageDeflateParameters(again![0], isResponse: isResponse)) == p, "round trip of \(p)")
            }
        }
    }
}

enum UpgradeRequestProbe {
    static func negotiate(_ req: HTTPRequestHead) -> String? {
        req.tokens("Sec-WebSocket-Protocol").first { $0 == "chat" }
    }
}

runFuzzer(fuzzOne)
