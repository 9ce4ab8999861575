@testable import FerryStore
import Testing

/// `Hex`, the one home of hex text for digests, file names, tokens and password hashes.
@Suite struct HexTests {
    @Test func decodeIsEncodesInverse() {
        let bytes: [UInt8] = [0x00, 0x01, 0x7f, 0x80, 0xab, 0xff]
        #expect(Hex.encode(bytes) == "00017f80abff")
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
        #expect(Hex.decode("") == [])
    }

    @Test(arguments: ["0", "abc", "0g", "zz", " 0", "00 "])
    func decodeRefusesWhatIsNotHex(_ text: String) {
        #expect(Hex.decode(text) == nil)
    }

    /// One spelling by default, so a file named in uppercase is not taken for the blob whose
    /// name is lowercase; uppercase only where asked for.
    @Test func uppercaseOnlyWhenAllowed() {
        #expect(Hex.decode("ABff") == nil)
        #expect(Hex.decode("ABff", allowingUppercase: true) == [0xab, 0xff])
        #expect(BlobStore.digest(fromFileName: String(repeating: "A", count: 40) + ".blob") == nil)
        #expect(BlobStore.digest(fromFileName: String(repeating: "a", count: 40) + ".blob")?.bytes == [UInt8](repeating: 0xaa, count: 20))
    }

    /// The eight-digits-at-once reader agrees with the one-digit-at-a-time one on every byte in
    /// every position of a valid run: each of the 256 values, so every character just outside
    /// "0"…"9" and "a"…"f" (and bytes with the top bit set) is refused wherever it stands.
    @Test func eightDigitsAtOnceAgreeWithOneAtATime() {
        let valid = Array("09af5e1c".utf8)
        for position in 0..<8 {
            for byte in 0...255 {
                var text = valid
                text[position] = UInt8(byte)
                let scalar = Hex.decode(String(decoding: text, as: UTF8.self))
                    .map { $0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
                let swar = text.withUnsafeBytes { Hex.value8(at: $0.baseAddress!) }
                #expect(swar == scalar, "byte \(byte) at \(position)")
            }
        }
    }

    /// Writing eight digits at once is the inverse of reading them, and spells what `encode` does.
    @Test func eightDigitsWrittenAtOnceReadBack() {
        var g = SystemRandomNumberGenerator()
        for value in [0, 1, 9, 10, 15, 16, 0xFFFF_FFFF, 0x0123_4567, 0x89AB_CDEF] + (0..<2000).map({ _ in UInt32.random(in: .min ... .max, using: &g) }) {
            var text = [UInt8](repeating: 0, count: 8)
            text.withUnsafeMutableBytes { Hex.write8(UInt32(value), to: $0.baseAddress!) }
            let bigEndian = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: UInt32(value) >> $0) }
            #expect(String(decoding: text, as: UTF8.self) == Hex.encode(bigEndian))
            #expect(text.withUnsafeBytes { Hex.value8(at: $0.baseAddress!) } == UInt32(value))
        }
    }
}
