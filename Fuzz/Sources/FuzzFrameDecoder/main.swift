@_spi(Fuzzing) import FerryWebSocket
import FuzzSupport

// Drives the streaming state machine (both roles, without and with permessage-deflate) and the
// value-level FrameDecoder with arbitrary bytes split at an input-chosen point. Any crash, trap or
// sanitizer report is a bug; typed errors are the expected outcome for garbage. With deflate the
// inflater parses the RSV1 payloads: no delivered message may exceed the limit.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let split = Int(data[0]) % max(1, size)
    var config = WebSocketConfiguration()
    config.maxFrameSize = 1 << 16
    config.maxMessageSize = 1 << 17
    // The first byte also picks the peer's window (8…15) and whether it keeps its context.
    var response = PerMessageDeflateParameters()
    response.serverMaxWindowBits = 8 + Int(data[0] & 7)
    response.clientMaxWindowBits = 8 + Int((data[0] >> 3) & 7)
    response.clientMaxWindowBitsPresent = true
    response.serverNoContextTakeover = data[0] & 0x40 != 0
    response.clientNoContextTakeover = data[0] & 0x80 != 0
    let runs: [(WebSocketRole, PerMessageDeflateAgreement?)] = [
        (.server, nil), (.client, nil),
        (.server, PerMessageDeflateAgreement(role: .server, response: response, options: PerMessageDeflateOptions())),
        (.client, PerMessageDeflateAgreement(role: .client, response: response, options: PerMessageDeflateOptions())),
    ]
    for (role, deflate) in runs {
        var out = 0
        let machine = WebSocketStateMachine(role: role, configuration: config, deflate: deflate) { out += $0.count }
        var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
        bytes.withUnsafeMutableBytes { raw in
            let cut = min(split, raw.count)
            for part in [UnsafeMutableRawBufferPointer(rebasing: raw[..<cut]), UnsafeMutableRawBufferPointer(rebasing: raw[cut...])] {
                machine.receive(part) { event in
                    if case .message(let kind, let payload) = event {
                        precondition(payload.count <= config.maxMessageSize, "delivered a message over the limit")
                        if kind == .text { precondition(UTF8Validator.isValid(payload), "delivered invalid UTF-8") }
                    }
                }
            }
        }
        if deflate != nil { continue }
        var decoder = FrameDecoder(role: role, maxFrameSize: 1 << 16)
        decoder.feed(UnsafeBufferPointer(start: data + 1, count: size - 1))
        while let frame = try? decoder.next() { precondition(frame.payload.count == frame.header.payloadLength) }
    }
    return 0
}

runFuzzer(fuzzOne)
