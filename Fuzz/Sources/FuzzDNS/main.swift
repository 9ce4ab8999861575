import FerryDNS
import FuzzSupport

// Feeds arbitrary bytes to the DNS message decoder under its default limits (9000 bytes, 512
// entries, 64 pointer jumps per name). Typed errors are expected; crashes, traps, sanitizer
// reports are bugs, and so is a decoded message that does not survive being written and read
// again (Protocol/dns-sd.md, "Encoding"): it must decode to the same message, and writing that
// must give the same bytes.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    guard let message = try? DNSMessage.decode(bytes) else { return 0 }
    let encoded = message.encode()
    // Re-encoding may grow a message (a sender can point into bytes the encoder never points
    // into), so the second read has no size limit.
    var unlimited = DNSLimits()
    unlimited.maxMessageSize = .max
    let again: DNSMessage
    do {
        again = try DNSMessage.decode(encoded, limits: unlimited)
    } catch {
        preconditionFailure("an encoded message does not decode: \(error)")
    }
    precondition(again == message, "decode(encode(m)) differs from m")
    precondition(again.encode() == encoded, "encoding is not stable")
    return 0
}

runFuzzer(fuzzOne)
