import FerryDNS
import Testing

@Suite("DNS encoding and round trips (Protocol/dns-sd.md, \"Encoding\")")
struct RoundTripTests {
    typealias F = Fixtures

    /// Decoding the encoding gives the message back, and encoding that gives the same bytes.
    func roundTrip(_ m: DNSMessage, limits: DNSLimits = DNSLimits()) throws -> [UInt8] {
        let bytes = m.encode()
        let back = try DNSMessage.decode(bytes, limits: limits)
        #expect(back == m)
        #expect(back.encode() == bytes)
        return bytes
    }

    @Test func everyRecordTypeInEverySection() throws {
        let records: [DNSRecord] = [
            DNSRecord(name: F.host, data: .a(F.ipv4), ttl: 120, cacheFlush: true),
            DNSRecord(name: F.host, data: .aaaa(F.ipv6), ttl: 120, cacheFlush: true),
            DNSRecord(name: F.service, data: .ptr(F.instance), ttl: 4500),
            DNSRecord(name: F.instance, data: .srv(priority: 1, weight: 65535, port: 65535, target: F.host), ttl: 120),
            DNSRecord(name: F.instance, data: .txt([Array("a=1".utf8), [], [UInt8](repeating: 0xFF, count: 255)]), ttl: 4500),
            DNSRecord(name: F.instance, data: .nsec(next: F.instance, types: [.txt, .srv, DNSType(1234), DNSType(65535), .any]), ttl: 4500),
            DNSRecord(name: "x.local", data: .unknown(type: DNSType(65280), bytes: [1, 2, 3]), ttl: 1, recordClass: 255),
            DNSRecord(name: .root, data: .srv(priority: 0, weight: 0, port: 0, target: .root), ttl: 0),
        ]
        let m = DNSMessage(id: 0x1234, flags: 0xFFFF,
                           questions: [DNSQuestion(name: F.service, type: .ptr, unicastResponse: true),
                                       DNSQuestion(name: F.instance, type: .any, recordClass: 0x7FFF)],
                           answers: records, authorities: records.reversed(), additionals: records)
        _ = try roundTrip(m)
    }

    @Test func flagAccessors() {
        var m = DNSMessage()
        m.isResponse = true
        m.isAuthoritative = true
        #expect(m.flags == 0x8400)
        m.isTruncated = true
        #expect(m.flags == 0x8600 && m.isTruncated)
        m.isResponse = false
        #expect(m.flags == 0x0600 && !m.isResponse)
        let other = DNSMessage(flags: 0x7805)  // opcode 15, rcode 5
        #expect(other.opcode == 15 && other.responseCode == 5)
    }

    /// Names compress against exact bytes, so each keeps the case it was written in.
    @Test func compressionKeepsCase() throws {
        let m = DNSMessage(questions: [DNSQuestion(name: "Foo.local", type: .a), DNSQuestion(name: "foo.LOCAL", type: .a),
                                       DNSQuestion(name: "bar.LOCAL", type: .a)])
        let bytes = try roundTrip(m)
        let back = try DNSMessage.decode(bytes)
        #expect(back.questions.map(\.name.description) == ["Foo.local", "foo.LOCAL", "bar.LOCAL"])
        // 12 + ("Foo.local" 11 + 4) + ("foo.LOCAL" 11 + 4) + ("bar" + pointer 6 + 4).
        #expect(bytes.count == 12 + 15 + 15 + 10)
    }

    /// Every suffix is shared: the second name is one label and a pointer.
    @Test func compressionPointsToTheLongestSuffix() throws {
        let m = DNSMessage(answers: [DNSRecord(name: F.service, data: .ptr(F.instance), ttl: 1),
                                     DNSRecord(name: F.instance, data: .srv(priority: 0, weight: 0, port: 1, target: F.host), ttl: 1)])
        let bytes = try roundTrip(m)
        // The SRV's owner is a pointer to the PTR's data; its target's "local" a pointer too.
        let srvStart = 12 + 19 + 10 + 21
        #expect(Array(bytes[srvStart..<srvStart + 2]) == [0xC0, 41])
        #expect(Array(bytes.suffix(2)) == [0xC0, 24])
    }

    /// Suffixes written past offset 0x3FFF cannot be pointed to (14 bits); names there are
    /// written out, and the message still reads back.
    @Test func namesBeyondThePointerRange() throws {
        var records: [DNSRecord] = []
        for i in 0..<400 {
            let name = try #require(F.service.prepending(label: "instance number \(i) with a long label"))
            records.append(DNSRecord(name: name, data: .ptr(name), ttl: 1))
        }
        let m = DNSMessage(answers: records)
        let bytes = try roundTrip(m, limits: F.unlimited)
        #expect(bytes.count > 0x4000)
    }

    /// A record that cannot be written is left out and not counted.
    @Test func unwritableRecordsAreLeftOut() throws {
        let good = DNSRecord(name: "a.local", data: .a(F.ipv4), ttl: 1)
        let m = DNSMessage(answers: [DNSRecord(name: "b.local", data: .a([1, 2, 3]), ttl: 1), good,
                                     DNSRecord(name: "c.local", data: .aaaa([1]), ttl: 1)],
                           additionals: [DNSRecord(name: "big.local", data: .unknown(type: DNSType(99), bytes: [UInt8](repeating: 7, count: 70_000)), ttl: 1),
                                         good])
        let back = try DNSMessage.decode(m.encode())
        #expect(back.answers == [good] && back.additionals == [good])
        // The too-large record's name was written then undone: nothing may point into it.
        #expect(back.encode() == m.encode())
        // A TXT string over 255 bytes is left out of its record; if none remain, one empty string.
        let txt = DNSMessage(answers: [DNSRecord(name: "t.local", data: .txt([[UInt8](repeating: 1, count: 256), [2]]), ttl: 1),
                                       DNSRecord(name: "u.local", data: .txt([[UInt8](repeating: 1, count: 300)]), ttl: 1),
                                       DNSRecord(name: "v.local", data: .txt([]), ttl: 1)])
        let txtBack = try DNSMessage.decode(txt.encode())
        #expect(txtBack.answers.map(\.data) == [.txt([[2]]), .txt([[]]), .txt([[]])])
    }

    /// A TXT record with many strings over 65,535 bytes of data is left out too.
    @Test func oversizedTXTIsLeftOut() throws {
        let strings = [[UInt8]](repeating: [UInt8](repeating: 0x61, count: 255), count: 300)
        let m = DNSMessage(answers: [DNSRecord(name: "a.local", data: .txt(strings), ttl: 1),
                                     DNSRecord(name: "a.local", data: .ptr("b.local"), ttl: 1)])
        let back = try DNSMessage.decode(m.encode())
        #expect(back.answers.map(\.type) == [.ptr])
    }

    @Test func nsecBitmapsAcrossWindows() throws {
        let types: Set<DNSType> = [.a, DNSType(7), DNSType(255), DNSType(256), DNSType(0x1234), DNSType(65535)]
        let m = DNSMessage(answers: [DNSRecord(name: "a.local", data: .nsec(next: "a.local", types: types), ttl: 1)])
        let bytes = try roundTrip(m)
        // Window 0: types 1, 7, 255 → 32 bytes; window 1: 256 → 1 byte; 0x12: 0x34 → 7; 0xFF: 255 → 32.
        let rdata = Array(bytes.suffix(2 + (2 + 32) + (2 + 1) + (2 + 7) + (2 + 32)))
        #expect(Array(rdata.prefix(2)) == [0xC0, 12])
        #expect(Array(rdata[2..<6]) == [0, 32, 0x41, 0x00])
        // The RFC 6762 §6.1 form: window 0 only, as short as the highest type allows.
        let short = DNSMessage(answers: [DNSRecord(name: "a.local", data: .nsec(next: "a.local", types: [.a]), ttl: 1)])
        #expect(Array(try roundTrip(short).suffix(5)) == [0xC0, 12, 0, 1, 0x40])
        let empty = DNSMessage(answers: [DNSRecord(name: "a.local", data: .nsec(next: "a.local", types: []), ttl: 1)])
        #expect(Array(try roundTrip(empty).suffix(4)) == [0, 2, 0xC0, 12], "no bitmap at all")
    }

    @Test func classBits() throws {
        let m = DNSMessage(questions: [DNSQuestion(name: "a.local", type: .a, unicastResponse: true, recordClass: 0x8001)],
                           answers: [DNSRecord(name: "a.local", data: .a(F.ipv4), ttl: 1, cacheFlush: false, recordClass: 0x8001)])
        let bytes = m.encode()
        // Only the low 15 bits of recordClass are written; the top bit is the flag.
        let back = try DNSMessage.decode(bytes)
        #expect(back.questions.first?.recordClass == 1 && back.questions.first?.unicastResponse == true)
        #expect(back.answers.first?.recordClass == 1 && back.answers.first?.cacheFlush == false)
    }

    @Test func emptyMessage() throws {
        #expect(try roundTrip(DNSMessage()) == [UInt8](repeating: 0, count: 12))
    }
}
