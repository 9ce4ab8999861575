@_spi(Fuzzing) import FerryServer
import FuzzSupport

// Feeds arbitrary bytes to the REST API's parsers of untrusted input (RESTFuzzing.run): the
// request target, a multipart/related body and its boundary, a Range field, Basic credentials,
// a _find selector and a _revisions history, cut from the input at 0xFF bytes. Typed errors
// are expected; crashes, traps and sanitizer reports are bugs.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    RESTFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

runFuzzer(fuzzOne)
