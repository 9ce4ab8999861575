import FerryDNS

/// The names and messages of Protocol/vectors/dns.hex, spelled out independently of the bytes.
enum Fixtures {
    static let service: DNSName = "_ferry._tcp.local"
    /// A UTF-8 apostrophe and a dot inside the first label.
    static let instance: DNSName = "Molly’s Mac v1\\.2._ferry._tcp.local"
    static let host: DNSName = "Mollys-Mac.local"
    static let ipv4: [UInt8] = [192, 0, 2, 10]
    static let ipv6: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [0x10]

    static let queryPTRQU = DNSMessage(questions: [DNSQuestion(name: service, type: .ptr, unicastResponse: true)])

    static let queryKnownAnswer = DNSMessage(questions: [DNSQuestion(name: service, type: .ptr)],
                                             answers: [DNSRecord(name: service, data: .ptr(instance), ttl: 4500)])

    static let probe = DNSMessage(
        questions: [DNSQuestion(name: instance, type: .any, unicastResponse: true)],
        authorities: [DNSRecord(name: instance, data: .srv(priority: 0, weight: 0, port: 4984, target: host), ttl: 120),
                      DNSRecord(name: instance, data: .txt([Array("txtvers=1".utf8)]), ttl: 4500)])

    static let response = DNSMessage(
        flags: 0x8400,
        answers: [DNSRecord(name: service, data: .ptr(instance), ttl: 4500)],
        additionals: [
            DNSRecord(name: instance, data: .srv(priority: 0, weight: 0, port: 4984, target: host), ttl: 120, cacheFlush: true),
            DNSRecord(name: instance, data: .txt([Array("txtvers=1".utf8), Array("secure".utf8)]), ttl: 4500, cacheFlush: true),
            DNSRecord(name: host, data: .a(ipv4), ttl: 120, cacheFlush: true),
            DNSRecord(name: host, data: .aaaa(ipv6), ttl: 120, cacheFlush: true),
            DNSRecord(name: instance, data: .nsec(next: instance, types: [.txt, .srv]), ttl: 4500, cacheFlush: true),
            DNSRecord(name: host, data: .nsec(next: host, types: [.a, .aaaa]), ttl: 120, cacheFlush: true),
        ])

    static let goodbye = DNSMessage(flags: 0x8400, answers: [DNSRecord(name: service, data: .ptr(instance), ttl: 0)])

    /// CNAME data as stored: the target written out in full (the vector compresses it).
    static let otherTypes = DNSMessage(
        flags: 0x8400,
        answers: [DNSRecord(name: "alias.local", data: .unknown(type: DNSType(5), bytes: wire(host)), ttl: 120),
                  DNSRecord(name: host, data: .unknown(type: DNSType(13), bytes: [5] + Array("ARM64".utf8) + [5] + Array("Linux".utf8)), ttl: 120)],
        additionals: [DNSRecord(name: .root, data: .unknown(type: DNSType(41), bytes: []), ttl: 0, recordClass: 1440)])

    /// A name's uncompressed wire form.
    static func wire(_ name: DNSName) -> [UInt8] {
        name.labels.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } + [0]
    }

    /// A 12-byte header with these counts (id 0, flags 0 unless given).
    static func header(id: UInt16 = 0, flags: UInt16 = 0, qd: UInt16 = 0, an: UInt16 = 0, ns: UInt16 = 0, ar: UInt16 = 0) -> [UInt8] {
        [id, flags, qd, an, ns, ar].flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// Type, class, TTL and length fields of a record with `rdata` after them.
    static func fields(type: UInt16, rdclass: UInt16 = 1, ttl: UInt32 = 120, rdata: [UInt8], length: Int? = nil) -> [UInt8] {
        let n = UInt16(length ?? rdata.count)
        return [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(rdclass >> 8), UInt8(rdclass & 0xFF),
                UInt8(ttl >> 24), UInt8((ttl >> 16) & 0xFF), UInt8((ttl >> 8) & 0xFF), UInt8(ttl & 0xFF),
                UInt8(n >> 8), UInt8(n & 0xFF)] + rdata
    }

    /// Limits that accept any size of message: a re-encoded message may be larger than the one
    /// it came from (the sender may have pointed into places the encoder does not).
    static var unlimited: DNSLimits {
        var l = DNSLimits()
        l.maxMessageSize = Int.max
        return l
    }
}
