/// A DNS message as Multicast DNS carries it (RFC 1035 §4.1, RFC 6762 §18): a header and four
/// sections (Protocol/dns-sd.md, "Header"). Sans-I/O: `decode` takes a datagram's bytes and
/// `encode` returns the bytes to send.
public struct DNSMessage: Hashable, Sendable {
    /// The query identifier; zero in Multicast DNS (RFC 6762 §18.1) except in answers to
    /// legacy unicast queries, which echo the query's.
    public var id: UInt16
    /// The header's flag bits as on the wire: QR, opcode, AA, TC, RD, RA, Z, AD, CD, RCODE.
    public var flags: UInt16
    /// The question section.
    public var questions: [DNSQuestion]
    /// The answer section.
    public var answers: [DNSRecord]
    /// The authority section: in a probe, the records the prober proposes (RFC 6762 §8.2).
    public var authorities: [DNSRecord]
    /// The additional section.
    public var additionals: [DNSRecord]

    /// A message with these fields; by default an empty query with id 0.
    public init(id: UInt16 = 0, flags: UInt16 = 0, questions: [DNSQuestion] = [], answers: [DNSRecord] = [],
                authorities: [DNSRecord] = [], additionals: [DNSRecord] = []) {
        self.id = id
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    /// The QR bit: a response rather than a query.
    public var isResponse: Bool {
        get { flags & 0x8000 != 0 }
        set { setFlag(0x8000, newValue) }
    }

    /// The AA bit: an authoritative answer. Multicast DNS responses set it (RFC 6762 §18.4).
    public var isAuthoritative: Bool {
        get { flags & 0x0400 != 0 }
        set { setFlag(0x0400, newValue) }
    }

    /// The TC bit. In a Multicast DNS query it means more known answers follow in the next
    /// packet (RFC 6762 §7.2); responses do not set it (§18.5).
    public var isTruncated: Bool {
        get { flags & 0x0200 != 0 }
        set { setFlag(0x0200, newValue) }
    }

    /// The opcode (4 bits); Multicast DNS messages with another opcode than 0 are ignored
    /// (RFC 6762 §18.3).
    public var opcode: UInt8 { UInt8(truncatingIfNeeded: flags >> 11) & 0x0F }

    /// The response code (4 bits); Multicast DNS messages with another code than 0 are ignored
    /// (RFC 6762 §18.11).
    public var responseCode: UInt8 { UInt8(truncatingIfNeeded: flags) & 0x0F }

    private mutating func setFlag(_ bit: UInt16, _ on: Bool) {
        if on { flags |= bit } else { flags &= ~bit }
    }

    /// The message in `bytes`, checked against `limits` (Protocol/dns-sd.md, "Malformed
    /// packets"). Every length, count and pointer is checked before it is followed; any fault
    /// throws and nothing of the message is returned. Bytes after the last record are ignored.
    public static func decode(_ bytes: [UInt8], limits: DNSLimits = DNSLimits()) throws(DNSError) -> DNSMessage {
        guard bytes.count <= limits.maxMessageSize else { throw .messageTooLarge(bytes.count) }
        var reader = DNSReader(bytes: bytes, limits: limits)
        return try reader.message()
    }

    /// The message in `bytes` (any collection: a slice, `Data`); see `decode(_:limits:)`.
    public static func decode(_ bytes: some Collection<UInt8>, limits: DNSLimits = DNSLimits()) throws(DNSError) -> DNSMessage {
        // Sized before copying, so an oversized input costs no allocation.
        let count = bytes.count
        guard count <= limits.maxMessageSize else { throw .messageTooLarge(count) }
        return try decode(Array(bytes), limits: limits)
    }

    /// The message in a received datagram's buffer; see `decode(_:limits:)`.
    public static func decode(_ bytes: UnsafeRawBufferPointer, limits: DNSLimits = DNSLimits()) throws(DNSError) -> DNSMessage {
        guard bytes.count <= limits.maxMessageSize else { throw .messageTooLarge(bytes.count) }
        return try decode(Array(bytes), limits: limits)
    }

    /// The message's bytes (Protocol/dns-sd.md, "Encoding"): every name compressed against the
    /// names before it (RFC 1035 §4.1.4), those inside PTR, SRV and NSEC data included
    /// (RFC 6762 §18.14). Compression matches labels byte for byte, so each name keeps the
    /// case it was given.
    ///
    /// No size limit is applied: a caller that must fit a packet (9000 bytes, RFC 6762 §17)
    /// checks the length and splits. A record that cannot be written is left out and not
    /// counted: A data not 4 bytes, AAAA data not 16, data over 65,535 bytes; so is every entry
    /// of a section past the 65,535th. TXT strings over 255 bytes are left out of their record.
    public func encode() -> [UInt8] {
        var writer = DNSWriter()
        writer.message(self)
        return writer.bytes
    }
}
