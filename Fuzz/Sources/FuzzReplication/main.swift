import FerryBLIP
@_spi(Fuzzing) import FerrySync
import FuzzSupport

// Feeds arbitrary bytes to the replication message parsers: the first byte picks the message
// (changes, proposeChanges, their responses, rev with properties split at NUL bytes), the rest
// is the body. Typed errors are expected; crashes, traps and sanitizer reports are bugs, and so is
// a `changes`/`proposeChanges` body that the direct reader and the general parser answer differently.
func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let body = Array(bytes.dropFirst())
    switch bytes[0] % 5 {
    case 0:
        _ = try? ReplicationWire.check(profile: "changes", body: body)
        // The direct reader of the usual shape must answer exactly as the general parser.
        precondition(ReplicationWire.readersAgree(profile: "changes", body: body))
    case 1:
        _ = try? ReplicationWire.check(profile: "proposeChanges", body: body)
        precondition(ReplicationWire.readersAgree(profile: "proposeChanges", body: body))
    case 2: _ = try? ReplicationWire.check(profile: "changes", body: body, isResponse: true, count: Int(bytes[0] >> 3))
    case 3: _ = try? ReplicationWire.check(profile: "proposeChanges", body: body, isResponse: true, count: Int(bytes[0] >> 3))
    default:
        // rev: "id\0rev\0history\0" then the body.
        let parts = body.split(separator: 0, maxSplits: 3, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        var props = BLIPProperties()
        for (i, key) in ["id", "rev", "history"].enumerated() where i < parts.count { props[key] = parts[i] }
        _ = try? ReplicationWire.check(profile: "rev", properties: props, body: Array((parts.count > 3 ? parts[3] : "").utf8))
    }
    return 0
}

runFuzzer(fuzzOne)
