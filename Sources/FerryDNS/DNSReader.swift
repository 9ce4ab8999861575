/// Reads one message from a datagram's bytes (Protocol/dns-sd.md, "Malformed packets"). Every
/// index is checked against the bytes before it is used: the arrays would trap otherwise, and a
/// packet from the network must never stop the process.
struct DNSReader {
    let bytes: [UInt8]
    let limits: DNSLimits
    /// Where the next field starts.
    private var offset = 0

    init(bytes: [UInt8], limits: DNSLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    mutating func message() throws(DNSError) -> DNSMessage {
        guard bytes.count >= 12 else { throw .truncated("header") }
        let id = u16(at: 0), flags = u16(at: 2)
        let counts = [u16(at: 4), u16(at: 6), u16(at: 8), u16(at: 10)].map(Int.init)
        // The counts are checked before anything is allocated for them: a 12-byte packet may
        // claim 4 × 65,535 entries.
        let total = counts.reduce(0, +)
        guard total <= limits.maxRecords else { throw .tooManyRecords(total) }
        offset = 12

        var questions: [DNSQuestion] = []
        questions.reserveCapacity(min(counts[0], (bytes.count - offset) / 5))
        for _ in 0..<counts[0] { questions.append(try question()) }
        var sections: [[DNSRecord]] = []
        for count in counts.dropFirst() {
            var records: [DNSRecord] = []
            records.reserveCapacity(min(count, (bytes.count - offset) / 11))
            for _ in 0..<count { records.append(try record()) }
            sections.append(records)
        }
        return DNSMessage(id: id, flags: flags, questions: questions,
                          answers: sections[0], authorities: sections[1], additionals: sections[2])
    }

    // MARK: Questions and records

    private mutating func question() throws(DNSError) -> DNSQuestion {
        let name = try ownerName()
        guard offset + 4 <= bytes.count else { throw .truncated("question type and class") }
        let type = u16(at: offset), rawClass = u16(at: offset + 2)
        offset += 4
        return DNSQuestion(name: name, type: DNSType(rawValue: type),
                           unicastResponse: rawClass & 0x8000 != 0, recordClass: rawClass & 0x7FFF)
    }

    private mutating func record() throws(DNSError) -> DNSRecord {
        let name = try ownerName()
        guard offset + 10 <= bytes.count else { throw .truncated("record type, class, TTL and length") }
        let type = u16(at: offset), rawClass = u16(at: offset + 2)
        let ttl = UInt32(u16(at: offset + 4)) << 16 | UInt32(u16(at: offset + 6))
        let length = Int(u16(at: offset + 8))
        let start = offset + 10
        guard start + length <= bytes.count else { throw .truncated("record data") }
        offset = start + length
        let data = try recordData(type: type, start: start, end: start + length)
        return DNSRecord(name: name, data: data, ttl: ttl,
                         cacheFlush: rawClass & 0x8000 != 0, recordClass: rawClass & 0x7FFF)
    }

    private mutating func ownerName() throws(DNSError) -> DNSName {
        let (labels, next) = try name(at: offset, bound: bytes.count)
        offset = next
        return try dnsName(labels)
    }

    /// The data of a record of `type` in `bytes[start..<end]`; it must fill the range exactly.
    private func recordData(type: UInt16, start: Int, end: Int) throws(DNSError) -> DNSRecordData {
        let length = end - start
        func bad(_ reason: String) -> DNSError { .badRecordData(type: type, reason: reason) }
        /// A name inside the data: it may be compressed (RFC 6762 §18.14), but what is not
        /// reached through a pointer must lie inside the data.
        func rdataName(at position: Int) throws(DNSError) -> (labels: [ArraySlice<UInt8>], next: Int) {
            do {
                return try name(at: position, bound: end)
            } catch .truncated {
                throw bad("a name runs past the record data")
            }
        }

        switch DNSType(rawValue: type) {
        case .a:
            guard length == 4 else { throw bad("A data of \(length) bytes, not 4") }
            return .a(Array(bytes[start..<end]))
        case .aaaa:
            guard length == 16 else { throw bad("AAAA data of \(length) bytes, not 16") }
            return .aaaa(Array(bytes[start..<end]))
        case .ptr:
            let (labels, next) = try rdataName(at: start)
            guard next == end else { throw bad("bytes after the PTR name") }
            return .ptr(try dnsName(labels))
        case .srv:
            guard length >= 7 else { throw bad("SRV data of \(length) bytes") }
            let (labels, next) = try rdataName(at: start + 6)
            guard next == end else { throw bad("bytes after the SRV target") }
            return .srv(priority: u16(at: start), weight: u16(at: start + 2), port: u16(at: start + 4),
                        target: try dnsName(labels))
        case .txt:
            // An empty TXT record is not legal, but RFC 6763 §6.1 has receivers read it as one
            // empty string, which is also how it is written back.
            guard length > 0 else { return .txt([[]]) }
            var strings: [[UInt8]] = []
            var p = start
            while p < end {
                let n = Int(bytes[p])
                guard p + 1 + n <= end else { throw bad("a TXT string runs past the record data") }
                strings.append(Array(bytes[p + 1..<p + 1 + n]))
                p += 1 + n
            }
            return .txt(strings)
        case .nsec:
            let (labels, next) = try rdataName(at: start)
            return .nsec(next: try dnsName(labels), types: try typeBitmaps(next..<end, bad: bad))
        default:
            if let layout = Self.compressibleLayouts[type] {
                return .unknown(type: DNSType(rawValue: type), bytes: try expanded(start..<end, layout: layout, bad: bad))
            }
            return .unknown(type: DNSType(rawValue: type), bytes: Array(bytes[start..<end]))
        }
    }

    /// The type bitmaps of an NSEC record (RFC 4034 §4.1.2): blocks of a window number, a
    /// bitmap length of 1 to 32, and the bitmap, where bit `i` (from the top of the first
    /// byte) stands for type `window × 256 + i`. Any window is read; RFC 6762 §6.1 writes only
    /// window 0.
    private func typeBitmaps(_ range: Range<Int>, bad: (String) -> DNSError) throws(DNSError) -> Set<DNSType> {
        var types = Set<DNSType>()
        var p = range.lowerBound
        while p < range.upperBound {
            guard p + 2 <= range.upperBound else { throw bad("an NSEC window header runs past the record data") }
            let window = Int(bytes[p]), length = Int(bytes[p + 1])
            guard (1...32).contains(length) else { throw bad("an NSEC bitmap of \(length) bytes") }
            guard p + 2 + length <= range.upperBound else { throw bad("an NSEC bitmap runs past the record data") }
            for i in 0..<length {
                let byte = bytes[p + 2 + i]
                for bit in 0..<8 where byte & (0x80 >> bit) != 0 {
                    types.insert(DNSType(rawValue: UInt16(window << 8 | i << 3 | bit)))
                }
            }
            p += 2 + length
        }
        return types
    }

    /// Where names sit in the data of the types whose names a sender may compress (RFC 6762
    /// §18.14; RFC 3597 §4 for the RFC 1035 types): bytes before the first name, and how many
    /// names follow. PTR, SRV and NSEC are parsed, so they are not here.
    private static let compressibleLayouts: [UInt16: (prefix: Int, names: Int)] = [
        2: (0, 1), 3: (0, 1), 4: (0, 1), 5: (0, 1),  // NS, MD, MF, CNAME
        6: (0, 2),  // SOA: MNAME, RNAME, then five 32-bit numbers
        7: (0, 1), 8: (0, 1), 9: (0, 1),  // MB, MG, MR
        14: (0, 2), 17: (0, 2),  // MINFO, RP
        15: (2, 1), 18: (2, 1), 21: (2, 1), 36: (2, 1),  // MX, AFSDB, RT, KX: a 16-bit preference first
        26: (2, 2),  // PX
        39: (0, 1),  // DNAME
    ]

    /// The data with its names written out in full, so it no longer depends on where it sits in
    /// this message; the bytes after the names are copied as they are.
    private func expanded(_ range: Range<Int>, layout: (prefix: Int, names: Int),
                          bad: (String) -> DNSError) throws(DNSError) -> [UInt8] {
        guard range.count >= layout.prefix + layout.names else { throw bad("data of \(range.count) bytes") }
        var out = Array(bytes[range.lowerBound..<range.lowerBound + layout.prefix])
        var p = range.lowerBound + layout.prefix
        for _ in 0..<layout.names {
            let labels: [ArraySlice<UInt8>]
            do {
                (labels, p) = try name(at: p, bound: range.upperBound)
            } catch .truncated {
                throw bad("a name runs past the record data")
            }
            for label in labels {
                out.append(UInt8(label.count))
                out += label
            }
            out.append(0)
        }
        out += bytes[p..<range.upperBound]
        return out
    }

    // MARK: Names

    /// The labels of the name at `start` and where the bytes after it begin (after its first
    /// pointer, if it has one). Labels read before any pointer must end by `bound` (the end of
    /// the record data for a name inside it); after a jump, by the end of the message.
    ///
    /// A pointer must point strictly before the labels that contain it (RFC 1035 §4.1.4 says
    /// "prior occurrence"). Each jump therefore lands earlier than the last one started, so no
    /// chain can loop; `maxPointerJumps` caps how long a chain may be all the same.
    func name(at start: Int, bound: Int) throws(DNSError) -> (labels: [ArraySlice<UInt8>], next: Int) {
        var labels: [ArraySlice<UInt8>] = []
        var p = start
        var segmentStart = start
        var bound = bound
        var next: Int?
        var jumps = 0
        var wireLength = 1
        // What has been read of this name, to tell a loop from a pointer that is merely forward.
        var read: [Range<Int>] = []
        while true {
            guard p < bound else { throw .truncated("name") }
            let first = bytes[p]
            switch first >> 6 {
            case 0:
                guard first != 0 else { return (labels, next ?? p + 1) }
                let n = Int(first)
                guard p + 1 + n <= bound else { throw .truncated("label") }
                // Counted as it goes, so a long run of labels stops at 255 bytes, not at the end.
                wireLength += 1 + n
                guard wireLength <= 255 else { throw .nameTooLong }
                labels.append(bytes[p + 1..<p + 1 + n])
                p += 1 + n
            case 3:
                guard p + 2 <= bound else { throw .truncated("compression pointer") }
                let target = Int(first & 0x3F) << 8 | Int(bytes[p + 1])
                read.append(segmentStart..<p + 2)
                guard target < segmentStart else {
                    throw read.contains { $0.contains(target) } ? DNSError.pointerLoop : DNSError.badPointer
                }
                jumps += 1
                guard jumps <= limits.maxPointerJumps else { throw .pointerLoop }
                if next == nil { next = p + 2 }
                p = target
                segmentStart = target
                bound = bytes.count
            default:
                throw .badLabelType(first)
            }
        }
    }

    /// A `DNSName` of wire labels, which must be UTF-8 (RFC 6762 §16). Their sizes were checked
    /// as they were read.
    private func dnsName(_ labels: [ArraySlice<UInt8>]) throws(DNSError) -> DNSName {
        var strings: [String] = []
        strings.reserveCapacity(labels.count)
        for label in labels {
            guard let s = String(validating: label, as: UTF8.self) else { throw .invalidName("a label is not UTF-8") }
            strings.append(s)
        }
        return DNSName(checked: strings)
    }

    private func u16(at i: Int) -> UInt16 { UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]) }
}
