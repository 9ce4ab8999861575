@_spi(Fuzzing) import FerryBLIP
import FuzzSupport

// Feeds arbitrary frames to a BLIPSession: the input is split into frames at 0xFE separator
// bytes (so one input exercises CRC chaining, multi-frame assembly, ACKs and the shared
// inflater across frames). Typed errors are expected; crashes, traps and sanitizer reports are bugs.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    var config = BLIPConfiguration()
    // Above IncomingMessage.chunkSize (1 MiB), so inflated frames can reach the separate-body path.
    config.maxMessageSize = 3 << 20
    let session = BLIPSession(configuration: config)
    // Give the session requests to receive responses for.
    for _ in 0..<4 { session.send(request: .request(profile: "p")) }
    while (try? session.nextFrame()) != nil {}
    let bytes = UnsafeBufferPointer(start: data, count: size)
    for frame in bytes.split(separator: 0xFE, omittingEmptySubsequences: false) {
        let f = Array(frame)
        do {
            _ = try f.withUnsafeBytes { raw in Result { () throws(BLIPError) in try session.receive(frame: raw) } }.get()
        } catch {
            break   // a fatal error ends the connection
        }
        while (try? session.nextFrame()) != nil {}
    }
    return 0
}

runFuzzer(fuzzOne)
