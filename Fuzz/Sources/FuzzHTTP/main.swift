import FerryHTTP
import FuzzSupport

// Feeds arbitrary bytes to the HTTP/1.1 request decoder and to the response decoder (the
// client's: a server's bytes are untrusted too), split into pieces at 0xFF bytes (so heads,
// chunk lines and bodies arrive cut anywhere), under small limits so they are reached; and the
// same bytes to the head accumulator and gzip decoder. Typed errors are expected; crashes,
// traps, sanitizer reports and a decoder that reports more body than it was given are bugs.
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
    let pieces = bytes.split(separator: 0xFF, omittingEmptySubsequences: false)
    for piece in pieces {
        guard let events = try? decoder.feed(piece) else { break }
        for case .body(let b) in events { bodyBytes += b.count }
        precondition(bodyBytes <= size, "more body than input")
        if decoder.awaitsUpgradeDecision { _ = try? decoder.declineUpgrade() }
    }
    // The same bytes as responses to a HEAD, a GET and a POST (framing depends on the method).
    var responses = HTTPResponseDecoder(limits: limits)
    for method in ["HEAD", "GET", "POST"] { responses.expectResponse(toMethod: method) }
    var responseBody = 0
    for piece in pieces {
        guard let events = try? responses.feed(piece) else { break }
        for case .body(let b) in events { responseBody += b.count }
        precondition(responseBody <= size, "more response body than input")
    }
    _ = try? responses.finish()
    var heads = HTTPHeadAccumulator(maxSize: 2048)
    if let (head, _) = (try? heads.feed(bytes)) ?? nil {
        _ = try? HTTPRequestHead.parse(head, limits: limits)
        _ = try? HTTPResponseHead.parse(head, limits: limits)
    }
    if let out = try? Gzip.decode(bytes, limit: 1 << 16) { precondition(out.count <= 1 << 16, "gzip past its limit") }
    return 0
}

runFuzzer(fuzzOne)
