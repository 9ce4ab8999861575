import FerryDNS
import Testing

@Suite("DNS-SD TXT key/value pairs (Protocol/dns-sd.md, \"TXT\")")
struct DNSTXTTests {
    func s(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func encodePairs() {
        #expect(DNSTXT.encode([("txtvers", "1"), ("secure", nil), ("path", ""), ("name", "Molly’s Mac")])
                == [s("txtvers=1"), s("secure"), s("path="), s("name=Molly’s Mac")])
        #expect(DNSTXT.encode([("a", "x=y")]) == [s("a=x=y")], "the first = separates")
    }

    @Test func encodeDropsWhatCannotBeRead() {
        let value253 = String(repeating: "v", count: 253)
        #expect(DNSTXT.encode([("k", value253)]) == [s("k=" + value253)], "255 bytes exactly")
        #expect(DNSTXT.encode([("k", value253 + "v"), ("ok", nil)]) == [s("ok")], "256 bytes")
        #expect(DNSTXT.encode([("", "x"), ("a=b", "c"), ("ké", "1"), ("tab\t", nil), ("k", "1")]) == [s("k=1")])
        #expect(DNSTXT.encode([]) == [[]], "no pairs: one empty string")
        #expect(DNSTXT.encode([("", nil)]) == [[]])
    }

    @Test func decodePairs() {
        let pairs = DNSTXT.decode([s("txtvers=1"), s("Secure"), s("path="), s("a=x=y"), s("n=Molly’s Mac")])
        #expect(pairs == ["txtvers": "1", "secure": nil, "path": "", "a": "x=y", "n": "Molly’s Mac"])
        #expect(pairs["secure"] == .some(nil), "a key alone: present, no value")
        #expect(pairs["missing"] == nil)
    }

    @Test func decodeEdgeCases() {
        // First occurrence wins, whatever the case (RFC 6763 §6.4).
        #expect(DNSTXT.decode([s("Key=1"), s("KEY=2"), s("key")]) == ["key": "1"])
        #expect(DNSTXT.decode([s("flag"), s("flag=late")]) == ["flag": nil])
        // No key: ignored. Empty strings: ignored.
        #expect(DNSTXT.decode([s("=x"), s("="), [], s("k=v")]) == ["k": "v"])
        #expect(DNSTXT.decode([[]]).isEmpty)
        #expect(DNSTXT.decode([]).isEmpty)
        // Binary values come through as text with replacement characters, not a failure.
        #expect(DNSTXT.decode([s("b=") + [0xFF, 0x00]]) == ["b": "\u{FFFD}\u{0}"])
        // Only ASCII letters are lowered in keys.
        #expect(DNSTXT.decode([s("ÉA=1")]).keys.first == "Éa")
    }

    @Test func throughARecord() throws {
        let strings = DNSTXT.encode([("txtvers", "1"), ("secure", nil)])
        let m = DNSMessage(answers: [DNSRecord(name: "a._ferry._tcp.local", data: .txt(strings), ttl: 4500, cacheFlush: true)])
        guard case .txt(let back)? = try DNSMessage.decode(m.encode()).answers.first?.data else {
            Issue.record("no TXT")
            return
        }
        #expect(DNSTXT.decode(back) == ["txtvers": "1", "secure": nil])
        let none = DNSMessage(answers: [DNSRecord(name: "a.local", data: .txt(DNSTXT.encode([])), ttl: 1)])
        #expect(try DNSMessage.decode(none.encode()) == none, "no pairs is the same record both ways")
    }
}
