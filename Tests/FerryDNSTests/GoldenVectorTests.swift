import FerryDNS
import FerryTestSupport
import Testing

@Suite("DNS golden vectors (Protocol/dns-sd.md, \"Golden vectors\")")
struct GoldenVectorTests {
    let v = namedHexVectors("dns.hex")

    /// Vectors FerryDNS must both read and write byte for byte.
    @Test(arguments: [
        ("query-ptr-qu", Fixtures.queryPTRQU),
        ("query-known-answer", Fixtures.queryKnownAnswer),
        ("probe", Fixtures.probe),
        ("response", Fixtures.response),
        ("goodbye", Fixtures.goodbye),
    ])
    func decodesAndEncodesExactly(name: String, message: DNSMessage) throws {
        let bytes = try #require(v[name], "vector \(name) missing")
        #expect(try DNSMessage.decode(bytes) == message)
        #expect(message.encode() == bytes, "encode differs from \(name)")
        // The decoded names keep their case and spelling: written back, they give the same bytes.
        #expect(try DNSMessage.decode(bytes).encode() == bytes)
    }

    /// dnspython's unicast-style response (SRV and NSEC names uncompressed) is the same message.
    @Test func unicastStyleCompressionDecodesToTheSameMessage() throws {
        let bytes = try #require(v["response-unicast-rdata"])
        let m = try DNSMessage.decode(bytes)
        #expect(m == Fixtures.response)
        #expect(m.encode() == v["response"], "written back with mDNS compression")
        #expect(m.encode().count < bytes.count)
    }

    @Test func typesKeptAsBytes() throws {
        let m = try DNSMessage.decode(try #require(v["response-other-types"]))
        #expect(m == Fixtures.otherTypes)
        // The CNAME's compressed target is stored expanded, so it survives being written elsewhere.
        #expect(try DNSMessage.decode(m.encode()) == m)
        let opt = try #require(m.additionals.first)
        #expect(opt.name == .root && opt.type == DNSType(41) && opt.recordClass == 1440 && !opt.cacheFlush)
    }

    @Test func headerBitsOfTheVectors() throws {
        let response = try DNSMessage.decode(try #require(v["response"]))
        #expect(response.isResponse && response.isAuthoritative && !response.isTruncated)
        #expect(response.opcode == 0 && response.responseCode == 0 && response.id == 0)
        let query = try DNSMessage.decode(try #require(v["query-ptr-qu"]))
        #expect(!query.isResponse && query.questions.first?.unicastResponse == true && query.questions.first?.recordClass == 1)
        #expect(response.additionals.map(\.cacheFlush) == [true, true, true, true, true, true])
        #expect(response.answers.first?.cacheFlush == false)
    }

    @Test func namesReadWithTheirExactSpelling() throws {
        let m = try DNSMessage.decode(try #require(v["response"]))
        #expect(m.answers.first.map { "\($0.name)" } == "_ferry._tcp.local")
        guard case .ptr(let instance)? = m.answers.first?.data else { Issue.record("no PTR"); return }
        #expect(instance.labels == ["Molly’s Mac v1.2", "_ferry", "_tcp", "local"])
        #expect(instance.description == "Molly’s Mac v1\\.2._ferry._tcp.local")
    }

    /// The three entry points read the same bytes the same way.
    @Test func decodeOverloadsAgree() throws {
        let bytes = try #require(v["response"])
        let a = try DNSMessage.decode(bytes)
        let b = try DNSMessage.decode(bytes[...])
        let c = try bytes.withUnsafeBytes { try DNSMessage.decode($0) }
        #expect(a == b && b == c)
    }
}
