/// Writes a message with name compression (Protocol/dns-sd.md, "Encoding").
struct DNSWriter {
    private(set) var bytes: [UInt8] = []
    /// Where each name suffix was first written in full, keyed by its uncompressed wire bytes
    /// (without the root's zero). Exact bytes, not case-folded: a name compressed against
    /// another spelled differently would come out in the other's case.
    private var suffixes: [[UInt8]: Int] = [:]

    mutating func message(_ m: DNSMessage) {
        u16(m.id)
        u16(m.flags)
        let countsAt = bytes.count
        bytes += [UInt8](repeating: 0, count: 8)
        var counts: [Int] = []
        var written = 0
        for q in m.questions.prefix(0xFFFF) {
            name(q.name)
            u16(q.type.rawValue)
            u16(q.recordClass & 0x7FFF | (q.unicastResponse ? 0x8000 : 0))
            written += 1
        }
        counts.append(written)
        for section in [m.answers, m.authorities, m.additionals] {
            written = 0
            for r in section where written < 0xFFFF {
                if record(r) { written += 1 }
            }
            counts.append(written)
        }
        for (i, count) in counts.enumerated() { patch(UInt16(count), at: countsAt + 2 * i) }
    }

    /// Writes `r`, or nothing if its data cannot be written (see `DNSMessage.encode`).
    private mutating func record(_ r: DNSRecord) -> Bool {
        switch r.data {
        case .a(let address) where address.count != 4: return false
        case .aaaa(let address) where address.count != 16: return false
        default: break
        }
        let start = bytes.count
        name(r.name)
        u16(r.type.rawValue)
        u16(r.recordClass & 0x7FFF | (r.cacheFlush ? 0x8000 : 0))
        u16(UInt16(truncatingIfNeeded: r.ttl >> 16))
        u16(UInt16(truncatingIfNeeded: r.ttl))
        let lengthAt = bytes.count
        u16(0)
        switch r.data {
        case .a(let address), .aaaa(let address):
            bytes += address
        case .ptr(let target):
            name(target)
        case .srv(let priority, let weight, let port, let target):
            u16(priority)
            u16(weight)
            u16(port)
            name(target)
        case .txt(let strings):
            let fitting = strings.filter { $0.count <= 255 }
            // No strings at all is not a legal TXT record: one empty string (RFC 6763 §6.1).
            if fitting.isEmpty { bytes.append(0) }
            for s in fitting {
                bytes.append(UInt8(s.count))
                bytes += s
            }
        case .nsec(let next, let types):
            name(next)
            typeBitmaps(types)
        case .unknown(_, let data):
            bytes += data
        }
        let length = bytes.count - lengthAt - 2
        guard length <= 0xFFFF else {
            // Undone whole, with the suffixes it registered: nothing may point into it.
            bytes.removeSubrange(start...)
            suffixes = suffixes.filter { $0.value < start }
            return false
        }
        patch(UInt16(length), at: lengthAt)
        return true
    }

    /// A name, ending in a pointer to the longest suffix already written, if any
    /// (RFC 1035 §4.1.4).
    private mutating func name(_ name: DNSName) {
        let labels = name.labels.map { Array($0.utf8) }
        // keys[i]: the wire bytes of labels[i...], built from the end.
        var keys = [[UInt8]](repeating: [], count: labels.count + 1)
        for i in labels.indices.reversed() {
            keys[i] = [UInt8(labels[i].count)] + labels[i] + keys[i + 1]
        }
        for i in labels.indices {
            if let offset = suffixes[keys[i]] {
                u16(0xC000 | UInt16(offset))
                return
            }
            // A pointer has 14 bits: a suffix written later than 0x3FFF cannot be pointed to.
            if bytes.count <= 0x3FFF { suffixes[keys[i]] = bytes.count }
            bytes.append(UInt8(labels[i].count))
            bytes += labels[i]
        }
        bytes.append(0)
    }

    /// NSEC type bitmaps (RFC 4034 §4.1.2): one block per window in increasing order, each as
    /// short as its highest type allows.
    private mutating func typeBitmaps(_ types: Set<DNSType>) {
        let byWindow = Dictionary(grouping: types.map(\.rawValue)) { $0 >> 8 }
        for window in byWindow.keys.sorted() {
            let lows = (byWindow[window] ?? []).map { Int($0 & 0xFF) }
            var bitmap = [UInt8](repeating: 0, count: (lows.max() ?? 0) / 8 + 1)
            for low in lows { bitmap[low / 8] |= 0x80 >> UInt8(low % 8) }
            bytes.append(UInt8(window))
            bytes.append(UInt8(bitmap.count))
            bytes += bitmap
        }
    }

    private mutating func u16(_ v: UInt16) {
        bytes.append(UInt8(v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    private mutating func patch(_ v: UInt16, at i: Int) {
        bytes[i] = UInt8(v >> 8)
        bytes[i + 1] = UInt8(truncatingIfNeeded: v)
    }
}
