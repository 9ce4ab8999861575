import FerryDNS
import Testing

@Suite("DNS names (Protocol/dns-sd.md, \"Names\")")
struct DNSNameTests {
    /// `DNSName(_:)` on a `String` value. Written `DNSName("…")` with a literal, Swift would use
    /// `init(stringLiteral:)` instead (SE-0213), which stops the program on an invalid name.
    func text(_ s: String) throws(DNSError) -> DNSName { try DNSName(s) }

    @Test func caseInsensitiveEqualityAndHash() throws {
        let a = try text("Foo.local"), b = try text("foo.LOCAL")
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
        #expect(a.hashValue == b.hashValue)
        #expect(a.description == "Foo.local" && b.description == "foo.LOCAL", "each keeps its spelling")
        #expect(try text("foo.local") != DNSName("foo.local.x"))
        #expect(try text("fob.local") != DNSName("foo.local"))
        // Only ASCII letters fold (RFC 6762 §16): É and é are different bytes and different names.
        #expect(try text("É.local") != DNSName("é.local"))
        // And bytes compare, not canonical equivalence: é precomposed vs e + combining acute.
        #expect(try DNSName(labels: ["\u{E9}"]) != DNSName(labels: ["e\u{301}"]))
        // '@' (0x40) and '`' (0x60) are not letters: no folding between them.
        #expect(try text("@") != DNSName("`"))
    }

    @Test func escapes() throws {
        let n = try text("Molly\\.s Mac._ferry._tcp.local")
        #expect(n.labels == ["Molly.s Mac", "_ferry", "_tcp", "local"])
        #expect(n.description == "Molly\\.s Mac._ferry._tcp.local")
        let backslash = try text("a\\\\b.local")
        #expect(backslash.labels == ["a\\b", "local"])
        #expect(backslash.description == "a\\\\b.local")
        #expect(try text("\\x\\ y").labels == ["x y"], "any other escaped character stands for itself")
        for text in ["Molly\\.s Mac._ferry._tcp.local", "a\\\\.b", "x\\\\\\..y", "Molly’s Mac v1\\.2.local", "."] {
            let name = try DNSName(text)
            #expect(try DNSName(name.description) == name && DNSName(name.description).labels == name.labels, "\(text)")
        }
        #expect(try DNSName(labels: ["a.b\\c", "d"]).description == "a\\.b\\\\c.d")
    }

    @Test func trailingDotAndRoot() throws {
        #expect(try text("foo.local.").labels == ["foo", "local"])
        #expect(try text("").labels.isEmpty)
        #expect(try text(".") == .root)
        #expect(DNSName.root.description == ".")
        #expect(DNSName.root.wireLength == 1)
    }

    @Test(arguments: ["a..b", ".a", "..", "a.\\", "a\\065.b", "a.b.."])
    func invalidText(_ text: String) {
        #expect(throws: DNSError.self) { try DNSName(text) }
    }

    @Test func labelAndNameSizes() throws {
        let l63 = String(repeating: "a", count: 63)
        #expect(try DNSName(labels: [l63]).wireLength == 65)
        #expect(throws: DNSError.labelTooLong) { try DNSName(labels: [l63 + "a"]) }
        // Multi-byte characters count as their UTF-8 bytes: 21 × 3 = 63, 22 × 3 = 66.
        #expect(try DNSName(labels: [String(repeating: "’", count: 21)]).labels.count == 1)
        #expect(throws: DNSError.labelTooLong) { try DNSName(labels: [String(repeating: "’", count: 22)]) }
        #expect(throws: DNSError.invalidName("empty label")) { try DNSName(labels: ["a", ""]) }
        // 255 bytes: 3 × (1 + 63) + (1 + 61) + 1.
        let max = [l63, l63, l63, String(repeating: "b", count: 61)]
        #expect(try DNSName(labels: max).wireLength == 255)
        #expect(throws: DNSError.nameTooLong) { try DNSName(labels: [l63, l63, l63, String(repeating: "b", count: 62)]) }
        let text = max.joined(separator: ".")
        #expect(try DNSName(text).wireLength == 255)
        #expect(throws: DNSError.nameTooLong) { try DNSName(text + "b") }
    }

    @Test func appendingAndPrepending() throws {
        let service = try text("_ferry._tcp.local")
        let instance = try #require(service.prepending(label: "Molly’s Mac"))
        #expect(instance.labels == ["Molly’s Mac", "_ferry", "_tcp", "local"])
        #expect(try text("a.b").appending(DNSName("c.d")) == DNSName("a.b.c.d"))
        #expect(service.prepending(label: "") == nil)
        #expect(service.prepending(label: String(repeating: "x", count: 64)) == nil)
        let long = try DNSName(labels: Array(repeating: String(repeating: "a", count: 63), count: 3))
        #expect(long.appending(long) == nil)
        #expect(long.appending(.root) == long)
        #expect(instance.hasSuffix(service) && instance.hasSuffix("LOCAL") && instance.hasSuffix(.root))
        #expect(!service.hasSuffix(instance) && !instance.hasSuffix("_udp.local"))
    }

    @Test func literals() {
        let n: DNSName = "_ferry._tcp.local"
        #expect(n.labels == ["_ferry", "_tcp", "local"])
    }

    @Test func typeNames() {
        #expect([DNSType.a, .ptr, .txt, .aaaa, .srv, .nsec, .any].map(\.description) == ["A", "PTR", "TXT", "AAAA", "SRV", "NSEC", "ANY"])
        #expect(DNSType(65280).description == "TYPE65280")
        #expect(DNSType(rawValue: 33) == .srv)
    }
}
