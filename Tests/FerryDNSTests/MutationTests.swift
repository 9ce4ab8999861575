import FerryDNS
import FerryTestSupport
import Testing

/// A property over thousands of damaged packets: decoding never traps, and whatever decodes
/// survives being written and read again (the fuzz target FuzzDNS checks the same, longer).
@Suite("Random mutations of the DNS golden vectors")
struct MutationTests {
    /// SplitMix64: a fixed seed, so a failure names a case that can be run again.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// One to four edits of the kinds that reach the decoder's checks: a random byte, a byte
    /// made a pointer or a long label, bytes cut, inserted or duplicated, a count changed.
    static func mutate(_ input: [UInt8], _ rng: inout Generator) -> [UInt8] {
        var b = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            guard !b.isEmpty else { break }
            let i = Int.random(in: 0..<b.count, using: &rng)
            switch Int.random(in: 0..<9, using: &rng) {
            case 0: b[i] = UInt8.random(in: 0...255, using: &rng)
            case 1: b[i] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            case 2: b[i] = 0xC0 | UInt8.random(in: 0...1, using: &rng)  // a pointer, low byte follows
            case 3: b[i] = [0, 1, 63, 64, 0x80, 0xFF].randomElement(using: &rng) ?? 0
            case 4: b.removeSubrange(i..<min(b.count, i + Int.random(in: 1...8, using: &rng)))
            case 5: b.insert(contentsOf: (0..<Int.random(in: 1...8, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: i)
            case 6: b = Array(b.prefix(i))
            case 7:
                let j = Int.random(in: i..<b.count, using: &rng)
                b.insert(contentsOf: b[i...j], at: Int.random(in: 0...b.count, using: &rng))
            default:
                // A header count: 4, 6, 8 or 10, its low byte.
                if b.count >= 12 { b[5 + 2 * Int.random(in: 0..<4, using: &rng)] = UInt8.random(in: 0...12, using: &rng) }
            }
        }
        return b
    }

    @Test func decodingNeverTrapsAndDecodedMessagesRoundTrip() throws {
        let vectors = namedHexVectors("dns.hex").sorted { $0.key < $1.key }
        try #require(vectors.count >= 7)
        var rng = Generator(state: 6762)
        var decoded = 0, refused = 0
        for (name, vector) in vectors {
            for n in 0..<3000 {
                let input = Self.mutate(vector, &rng)
                guard let m = try? DNSMessage.decode(input) else {
                    refused += 1
                    continue
                }
                decoded += 1
                let bytes = m.encode()
                let again = try? DNSMessage.decode(bytes, limits: Fixtures.unlimited)
                #expect(again == m, "\(name) mutation \(n): \(input)")
                #expect(again?.encode() == bytes, "\(name) mutation \(n): encoding not stable")
            }
        }
        // Both outcomes must be common, or the mutations test nothing.
        #expect(decoded > 1000 && refused > 1000, "decoded \(decoded), refused \(refused)")
    }
}
