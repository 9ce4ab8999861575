/// The data of a resource record, by type (Protocol/dns-sd.md, "Records"). The types DNS-SD
/// uses are parsed; any other type is kept as its bytes.
public enum DNSRecordData: Hashable, Sendable {
    /// An IPv4 address, 4 bytes in network order (RFC 1035 §3.4.1).
    case a([UInt8])
    /// An IPv6 address, 16 bytes in network order (RFC 3596 §2.2).
    case aaaa([UInt8])
    /// A pointer to a name: in DNS-SD, from a service type to one of its instances
    /// (RFC 1035 §3.3.12, RFC 6763 §4.1).
    case ptr(DNSName)
    /// Where a service instance runs: `target`'s addresses, `port` (RFC 2782; RFC 6763 §5).
    /// Lower `priority` first; `weight` shares load among equal priorities.
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// Character-strings of at most 255 bytes each (RFC 1035 §3.3.14); in DNS-SD, key/value
    /// pairs (`DNSTXT`). No strings and one empty string both mean "no pairs" and are written
    /// as one empty string (RFC 6763 §6.1); a decoded empty TXT record is `[[]]`.
    case txt([[UInt8]])
    /// The types `next`… has, as a negative answer: the name has no other types (RFC 4034 §4,
    /// RFC 6762 §6.1, where `next` is the record's own name).
    case nsec(next: DNSName, types: Set<DNSType>)
    /// A type this codec does not parse, as its bytes. For the types whose data RFC 6762
    /// §18.14 lets a sender compress (CNAME, NS, MX, SOA, …) the names are stored expanded,
    /// so the bytes mean the same wherever they are written.
    case unknown(type: DNSType, bytes: [UInt8])

    /// The record type this data belongs to.
    public var type: DNSType {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .ptr: .ptr
        case .srv: .srv
        case .txt: .txt
        case .nsec: .nsec
        case .unknown(let type, _): type
        }
    }
}
