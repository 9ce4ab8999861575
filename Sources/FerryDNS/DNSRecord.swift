/// A resource record (RFC 1035 §4.1.3): a name, its data (which carries the type), a time to
/// live, and in Multicast DNS the cache-flush bit (Protocol/dns-sd.md, "Records").
public struct DNSRecord: Hashable, Sendable {
    /// The record's owner name.
    public var name: DNSName
    /// The record's data, and so its type.
    public var data: DNSRecordData
    /// Seconds the record may be cached; 0 is a goodbye: the record is going away
    /// (RFC 6762 §10.1).
    public var ttl: UInt32
    /// The cache-flush bit, the top bit of the class field: this record is the whole set of
    /// its name and type, so caches drop other records of that set (RFC 6762 §10.2). Set on
    /// unique records (SRV, TXT, A, AAAA, NSEC), clear on shared ones (PTR).
    public var cacheFlush: Bool
    /// The class without its top bit: 1 (IN) in everything Multicast DNS sends. A record of
    /// another class is kept as it came. Only the low 15 bits are written; the top bit is
    /// `cacheFlush`.
    public var recordClass: UInt16

    /// The record's type, from its data.
    public var type: DNSType { data.type }

    /// A record of class IN unless given.
    public init(name: DNSName, data: DNSRecordData, ttl: UInt32, cacheFlush: Bool = false, recordClass: UInt16 = 1) {
        self.name = name
        self.data = data
        self.ttl = ttl
        self.cacheFlush = cacheFlush
        self.recordClass = recordClass
    }
}
