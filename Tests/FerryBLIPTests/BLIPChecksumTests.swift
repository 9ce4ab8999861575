@testable import FerryBLIP
import CZlib
import Testing

/// The folded CRC must equal zlib's `crc32` bit for bit: a mismatch would make every peer
/// (Couchbase Lite included) reject our frames.
struct BLIPChecksumTests {
    static func zlibCRC(_ bytes: [UInt8], start: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { UInt32(crc32(uLong(start), $0.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt($0.count))) }
    }

    @Test(arguments: [0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 129, 1000, 1024, 4096, 16_377, 70_001])
    func matchesZlibAtEveryLength(length: Int) {
        let bytes = noiseBody(length, seed: UInt32(length) &+ 7)
        var c = BLIPChecksum()
        bytes.withUnsafeBytes { c.update($0) }
        #expect(c.value == Self.zlibCRC(bytes), "length \(length)")
    }

    /// A running checksum over pieces of odd sizes equals one pass over the whole.
    @Test func runningValueAcrossUnevenPieces() {
        let bytes = noiseBody(200_000, seed: 3)
        var c = BLIPChecksum()
        var offset = 0
        var step = 1
        while offset < bytes.count {
            let end = min(bytes.count, offset + step)
            bytes[offset..<end].withUnsafeBytes { c.update($0) }
            offset = end
            step = step * 3 % 9_973 + 1
        }
        #expect(c.value == Self.zlibCRC(bytes))
        #expect(c.value != 0)
    }
}
