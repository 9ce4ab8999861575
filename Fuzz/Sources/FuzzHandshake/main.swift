import FerryWebSocket
import FuzzSupport

// Feeds arbitrary bytes to the HTTP head parser (in two pieces) and, when a head comes out,
// to the request and response parsers and the server/client handshake validators.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let split = Int(data[0]) % max(1, size)
    let body = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    var parser = HTTPHeadParser(maxSize: 4096)
    let cut = min(split, body.count)
    var head: [UInt8]?
    for part in [UnsafeRawBufferPointer(rebasing: body[..<cut]), UnsafeRawBufferPointer(rebasing: body[cut...])] {
        guard head == nil else { break }
        do { head = try parser.feed(part)?.head } catch { return 0 }
    }
    guard let head else { return 0 }
    if let req = try? HTTPHeadParser.parseRequest(head) {
        _ = try? ServerHandshake.validate(req)
        _ = UpgradeRequestProbe.negotiate(req)
    }
    if let resp = try? HTTPHeadParser.parseResponse(head) {
        _ = try? ClientHandshake(subprotocols: ["BLIP_3+CBMobile_3"], key: "dGhlIHNhbXBsZSBub25jZQ==").validate(resp)
    }
    return 0
}

enum UpgradeRequestProbe {
    static func negotiate(_ req: HTTPRequestHead) -> String? {
        req.headers.tokens("Sec-WebSocket-Protocol").first { $0 == "chat" }
    }
}

runFuzzer(fuzzOne)
