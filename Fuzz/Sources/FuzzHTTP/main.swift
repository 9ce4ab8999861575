import FerryHTTP
import FuzzSupport

// Feeds arbitrary bytes to the HTTP/1.1 request decoder, split into pieces at 0xFF bytes (so
// heads, chunk lines and bodies arrive cut anywhere), under small limits so they are reached.
// Typed errors are expected; crashes, traps, sanitizer reports and a decoder that reports
// more body than it was given are bugs.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = UnsafeBufferPointer(start: data, count: size)
    var limits = HTTPLimits()
    limits.maxHeadSize = 2048
    limits.maxBodySize = 4096
    limits.maxHeaderCount = 16
    limits.maxChunkLineSize = 64
    var decoder = HTTPRequestDecoder(limits: limits)
    var bodyBytes = 0
    for piece in bytes.split(separator: 0xFF, omittingEmptySubsequences: false) {
        guard let events = try? decoder.feed(piece) else { return 0 }
        for case .body(let b) in events { bodyBytes += b.count }
        precondition(bodyBytes <= size, "more body than input")
    }
    return 0
}

runFuzzer(fuzzOne)
