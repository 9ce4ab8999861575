/// One entry of a message's question section (RFC 1035 §4.1.2): a name and the type asked
/// for, and in Multicast DNS whether a unicast answer is wanted (Protocol/dns-sd.md, "Questions").
public struct DNSQuestion: Hashable, Sendable {
    /// The name asked about.
    public var name: DNSName
    /// The type asked for; `.any` asks for every type (a probe does, RFC 6762 §8.1).
    public var type: DNSType
    /// The QU bit, the top bit of the class field: the asker would like a unicast answer
    /// (RFC 6762 §5.4). Clear for an ordinary (QM) question.
    public var unicastResponse: Bool
    /// The class without its top bit: 1 (IN) in everything Multicast DNS sends. Only the low
    /// 15 bits are written; the top bit is `unicastResponse`.
    public var recordClass: UInt16

    /// A question for `name` and `type`, class IN unless given.
    public init(name: DNSName, type: DNSType, unicastResponse: Bool = false, recordClass: UInt16 = 1) {
        self.name = name
        self.type = type
        self.unicastResponse = unicastResponse
        self.recordClass = recordClass
    }
}
