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
}
