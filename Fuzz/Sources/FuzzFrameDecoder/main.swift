import FerryWebSocket
import FuzzSupport

// Drives the streaming state machine (both roles) and the value-level FrameDecoder with
// arbitrary bytes split at an input-chosen point. Any crash, trap or sanitizer report is a bug;
// typed errors are the expected outcome for garbage.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let split = Int(data[0]) % max(1, size)
    var config = WebSocketConfiguration()
    config.maxFrameSize = 1 << 16
    config.maxMessageSize = 1 << 17
    for role in [WebSocketRole.server, .client] {
        var out = 0
        let machine = WebSocketStateMachine(role: role, configuration: config) { out += $0.count }
        var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
        bytes.withUnsafeMutableBytes { raw in
            let cut = min(split, raw.count)
            for part in [UnsafeMutableRawBufferPointer(rebasing: raw[..<cut]), UnsafeMutableRawBufferPointer(rebasing: raw[cut...])] {
                machine.receive(part) { event in
                    if case .message(let kind, let payload) = event, kind == .text {
                        precondition(UTF8Validator.isValid(payload), "delivered invalid UTF-8")
                    }
                }
            }
        }
        var decoder = FrameDecoder(role: role, maxFrameSize: 1 << 16)
        decoder.feed(UnsafeBufferPointer(start: data + 1, count: size - 1))
        while let frame = try? decoder.next() { precondition(frame.payload.count == frame.header.payloadLength) }
    }
    return 0
}

runFuzzer(fuzzOne)
