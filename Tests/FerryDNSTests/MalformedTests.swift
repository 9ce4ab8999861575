import FerryDNS
import Testing

/// Packets a peer on the link could send: each is refused with its error, never a trap
/// (Protocol/dns-sd.md, "Malformed packets").
@Suite("Malformed DNS messages (Protocol/dns-sd.md, \"Malformed packets\")")
struct MalformedTests {
    typealias F = Fixtures
    let question = F.fields(type: 12, rdata: []).prefix(4)  // type PTR, class IN

    func error(_ bytes: [UInt8], limits: DNSLimits = DNSLimits()) -> DNSError? {
        do {
            _ = try DNSMessage.decode(bytes, limits: limits)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Compression pointers

    @Test func selfPointer() {
        #expect(error(F.header(qd: 1) + [0xC0, 12] + question) == .pointerLoop)
    }

    /// The name at 12 points to the header's id, which holds a pointer back to 12.
    @Test func twoPointersToEachOther() {
        #expect(error(F.header(id: 0xC00C, qd: 1) + [0xC0, 0x00] + question) == .pointerLoop)
    }

    /// A pointer after a label, back into that label: a loop too.
    @Test func pointerIntoItsOwnName() {
        #expect(error(F.header(qd: 1) + [1, 0x61, 0xC0, 12] + question) == .pointerLoop)
    }

    /// Forward, even to a well-formed name: refused (RFC 1035 §4.1.4 points to a prior occurrence).
    @Test func forwardPointer() {
        let bytes = F.header(qd: 2) + [0xC0, 18] + question + [1, 0x61, 0] + question
        #expect(error(bytes) == .badPointer)
        #expect(error(F.header(qd: 1) + [0xC0, 0xFF] + question) == .badPointer, "past the end")
    }

    /// A pointer into the middle of the record that holds it (the SRV's own target → its rdata).
    @Test func pointerIntoTheSameRecordsData() {
        let rdata: [UInt8] = [0, 0, 0, 0, 0x13, 0x78, 0xC0, 12 + 3 + 10 + 6]
        #expect(error(F.header(an: 1) + [1, 0x61, 0] + F.fields(type: 33, rdata: rdata)) == .pointerLoop)
    }

    /// A legitimate chain: each name points at a suffix of an earlier one that itself points back.
    @Test func chainedPointersAreRead() throws {
        // 12: "b.c"; 21: "a" → 12; 29: "x" → 21.
        let bytes = F.header(qd: 3) + [1, 0x62, 1, 0x63, 0] + question + [1, 0x61, 0xC0, 12] + question
            + [1, 0x78, 0xC0, 21] + question
        let m = try DNSMessage.decode(bytes)
        #expect(m.questions.map(\.name.description) == ["b.c", "a.b.c", "x.a.b.c"])
    }

    /// A record whose opaque data is a chain of `links` pointers, each to the one before, the
    /// first to "a" at 12; a second record named by the last link. `links + 1` jumps in all.
    func chain(_ links: Int) -> [UInt8] {
        var rdata: [UInt8] = []
        let rdataStart = 12 + 3 + 10
        for i in 0..<links {
            let target = i == 0 ? 12 : rdataStart + 2 * (i - 1)
            rdata += [0xC0 | UInt8(target >> 8), UInt8(target & 0xFF)]
        }
        let last = rdataStart + 2 * (links - 1)
        return F.header(an: 2) + [1, 0x61, 0] + F.fields(type: 0xFF00, rdata: rdata)
            + [0xC0 | UInt8(last >> 8), UInt8(last & 0xFF)] + F.fields(type: 1, rdata: [1, 2, 3, 4])
    }

    @Test func pointerJumpsAreCapped() throws {
        let ok = try DNSMessage.decode(chain(63))
        #expect(ok.answers.last?.name == "a")
        #expect(error(chain(64)) == .pointerLoop, "65 jumps")
        var tight = DNSLimits()
        tight.maxPointerJumps = 3
        #expect(error(chain(3), limits: tight) == .pointerLoop)
        #expect(error(chain(2), limits: tight) == nil)
    }

    // MARK: Lengths and counts

    @Test func labelPastTheEnd() {
        #expect(error(F.header(qd: 1) + [5, 0x61, 0x62]) == .truncated("label"))
        #expect(error(F.header(qd: 1) + [1, 0x61]) == .truncated("name"), "no terminating zero")
        #expect(error(F.header(qd: 1) + [0xC0]) == .truncated("compression pointer"))
        #expect(error(F.header(qd: 1) + [0, 0, 12, 0]) == .truncated("question type and class"))
        #expect(error(F.header(an: 1) + [0] + F.fields(type: 1, rdata: []).prefix(9)) == .truncated("record type, class, TTL and length"))
        #expect(error(F.header(qd: 1)) == .truncated("name"), "a count with nothing after the header")
        #expect(error(Array(F.header().prefix(11))) == .truncated("header"))
        #expect(error([]) == .truncated("header"))
    }

    @Test func rdlengthPastTheEnd() {
        #expect(error(F.header(an: 1) + [0] + F.fields(type: 1, rdata: [1, 2, 3, 4], length: 5)) == .truncated("record data"))
        #expect(error(F.header(an: 1) + [0] + F.fields(type: 16, rdata: [], length: 0xFFFF)) == .truncated("record data"))
    }

    @Test func countsClaimingMoreThanTheLimit() {
        #expect(error(F.header(qd: 0xFFFF)) == .tooManyRecords(65535))
        #expect(error(F.header(qd: 0xFFFF, an: 0xFFFF, ns: 0xFFFF, ar: 0xFFFF)) == .tooManyRecords(4 * 65535))
        #expect(error(F.header(ar: 513)) == .tooManyRecords(513))
        // At the limit the counts are believed, but the bytes run out at once (and nothing of
        // the 512 entries was allocated ahead).
        #expect(error(F.header(qd: 128, an: 128, ns: 128, ar: 128)) == .truncated("name"))
    }

    @Test func messageSize() {
        #expect(error([UInt8](repeating: 0, count: 9001)) == .messageTooLarge(9001))
        // 9000 bytes is allowed: an empty message with padding after it.
        #expect(error(F.header() + [UInt8](repeating: 0, count: 8988)) == nil)
        var small = DNSLimits()
        small.maxMessageSize = 100
        #expect(error([UInt8](F.header() + [UInt8](repeating: 0, count: 89)), limits: small) == .messageTooLarge(101))
        let data = [UInt8](repeating: 0, count: 9001)
        #expect(throws: DNSError.messageTooLarge(9001)) { try DNSMessage.decode(data[...]) }
    }

    /// 9,000 bytes of 63-byte labels: the name is refused once it passes 255 bytes, not read to the end.
    @Test func longNames() {
        var bytes = F.header(qd: 1)
        while bytes.count + 64 <= 9000 { bytes += [63] + [UInt8](repeating: 0x61, count: 63) }
        bytes += [UInt8](repeating: 0, count: 9000 - bytes.count)
        #expect(bytes.count == 9000)
        #expect(error(bytes) == .nameTooLong)
        // Exactly 255 bytes is a name; 256 is not.
        let l63 = [63] + [UInt8](repeating: 0x61, count: 63)
        let at255 = l63 + l63 + l63 + [61] + [UInt8](repeating: 0x62, count: 61) + [0]
        #expect(error(F.header(qd: 1) + at255 + question) == nil)
        let at256 = l63 + l63 + l63 + [62] + [UInt8](repeating: 0x62, count: 62) + [0]
        #expect(error(F.header(qd: 1) + at256 + question) == .nameTooLong)
        // Long through pointers: "b" + the 255-byte name → 257 bytes.
        #expect(error(F.header(qd: 2) + at255 + question + [1, 0x62, 0xC0, 12] + question) == .nameTooLong)
    }

    /// A length byte of 64 or more is a label type, not a length: 01 and 10 are reserved.
    @Test func labelTypes() {
        #expect(error(F.header(qd: 1) + [0x40] + [UInt8](repeating: 0x61, count: 64) + [0] + question) == .badLabelType(0x40))
        #expect(error(F.header(qd: 1) + [0x41, 0] + question) == .badLabelType(0x41), "EDNS0 extended label (RFC 6891 §5)")
        #expect(error(F.header(qd: 1) + [0x80, 0] + question) == .badLabelType(0x80))
        #expect(error(F.header(qd: 1) + [0xBF, 0] + question) == .badLabelType(0xBF))
        #expect(error(F.header(an: 1) + [0] + F.fields(type: 12, rdata: [0x80, 0])) == .badLabelType(0x80), "inside data")
    }

    @Test func labelsThatAreNotUTF8() {
        #expect(error(F.header(qd: 1) + [2, 0xC3, 0x28, 0] + question) == .invalidName("a label is not UTF-8"))
        #expect(error(F.header(an: 1) + [0] + F.fields(type: 12, rdata: [1, 0xFF, 0])) == .invalidName("a label is not UTF-8"))
    }

    // MARK: Record data

    static let badData: [(UInt16, [UInt8])] = [
        (1, [1, 2, 3]),  // A of 3 bytes
        (1, [1, 2, 3, 4, 5]),
        (28, [UInt8](repeating: 0, count: 15)),  // AAAA of 15
        (28, []),
        (12, [1, 0x61, 0, 0xFF]),  // PTR with a byte after the name
        (12, []),
        (12, [3, 0x61]),  // PTR name running past the data
        (33, [0, 0, 0, 0, 0, 80]),  // SRV without a target
        (33, [0, 0, 0, 0, 0, 80, 5, 0x61]),  // SRV target past the data
        (33, [0, 0, 0, 0, 0, 80, 0, 0]),  // SRV with a byte after the target
        (16, [5, 0x61, 0x62]),  // TXT string past the data
        (16, [0, 1]),
        (47, [0, 0, 0]),  // NSEC window with a zero-length bitmap
        (47, [0, 0, 33] + [UInt8](repeating: 0xFF, count: 33)),  // bitmap over 32 bytes
        (47, [0, 0, 4, 0x40]),  // bitmap past the data
        (47, [0, 0]),  // window header cut short
        (47, [0, 0, 1]),  // bitmap missing
        (47, [1]),  // next name past the data
        (5, [3, 0x61]),  // CNAME (compressible, stored expanded) past the data
        (15, [0]),  // MX without room for its preference and name
    ]

    @Test(arguments: badData)
    func recordDataThatDoesNotFit(type: UInt16, rdata: [UInt8]) {
        let bytes = F.header(an: 1) + [0] + F.fields(type: type, rdata: rdata) + [UInt8](repeating: 0, count: 40)
        guard case .badRecordData(let t, _)? = error(bytes) else {
            Issue.record("type \(type) \(rdata): \(String(describing: error(bytes)))")
            return
        }
        #expect(t == type)
    }

    /// A name inside data that reaches outside through a pointer is fine; its labels read
    /// before the pointer must stay inside the data.
    @Test func dataNamesMayPointOutside() throws {
        let bytes = F.header(an: 2) + [5] + Array("local".utf8) + [0] + F.fields(type: 1, rdata: [1, 2, 3, 4])
            + [0xC0, 12] + F.fields(type: 12, rdata: [1, 0x61, 0xC0, 12])
        let m = try DNSMessage.decode(bytes)
        #expect(m.answers.last?.data == .ptr("a.local"))
    }

    // MARK: Kept as they came

    @Test func unknownTypesAndOtherClassesAreKept() throws {
        let bytes = F.header(an: 2) + [0] + F.fields(type: 0xFF00, rdclass: 3, rdata: [9, 8, 7])
            + [0] + F.fields(type: 1, rdclass: 0x80FE, ttl: 0xFFFF_FFFF, rdata: [10, 0, 0, 1])
        let m = try DNSMessage.decode(bytes)
        #expect(m.answers[0] == DNSRecord(name: .root, data: .unknown(type: DNSType(0xFF00), bytes: [9, 8, 7]), ttl: 120, recordClass: 3))
        #expect(m.answers[1] == DNSRecord(name: .root, data: .a([10, 0, 0, 1]), ttl: 0xFFFF_FFFF, cacheFlush: true, recordClass: 0xFE))
        #expect(m.encode() == bytes)
    }

    @Test func bytesAfterTheLastRecordAreIgnored() throws {
        let bytes = F.header(qd: 1) + [0] + question + [0xDE, 0xAD]
        #expect(try DNSMessage.decode(bytes).questions.count == 1)
    }

    @Test func emptyTXTRecordReadsAsOneEmptyString() throws {
        let m = try DNSMessage.decode(F.header(an: 1) + [0] + F.fields(type: 16, rdata: []))
        #expect(m.answers.first?.data == .txt([[]]))
    }
}
