/// The most a DNS message may make the decoder read or allocate (Protocol/dns-sd.md,
/// "Limits"): every parser of untrusted bytes has a limit.
public struct DNSLimits: Sendable, Equatable {
    /// The largest message accepted, in bytes: 9000, the most RFC 6762 §17 lets a Multicast DNS
    /// packet carry (jumbo frames included). Larger is `DNSError.messageTooLarge`.
    public var maxMessageSize = 9000
    /// The most questions, answers, authorities and additionals together. The header's counts
    /// are checked against it before anything is allocated; more is `DNSError.tooManyRecords`.
    public var maxRecords = 512
    /// The most compression pointers followed while reading one name. Pointers must point
    /// backward, which already rules out loops; this caps the work a long chain can cost.
    public var maxPointerJumps = 64

    /// The defaults: 9000 bytes, 512 entries, 64 jumps per name.
    public init() {}
}
