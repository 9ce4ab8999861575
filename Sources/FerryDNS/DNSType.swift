/// A resource record type (RFC 1035 §3.2.2, and the registry that extends it). Any 16-bit
/// value is a type; the constants are the ones Multicast DNS service discovery uses.
public struct DNSType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The type's number on the wire.
    public var rawValue: UInt16

    /// The type numbered `rawValue`.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// The type numbered `rawValue`.
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// An IPv4 address (RFC 1035 §3.4.1).
    public static let a = DNSType(rawValue: 1)
    /// A pointer to another name: DNS-SD's service instance enumeration (RFC 6763 §4).
    public static let ptr = DNSType(rawValue: 12)
    /// Text strings: DNS-SD's key/value pairs (RFC 6763 §6).
    public static let txt = DNSType(rawValue: 16)
    /// An IPv6 address (RFC 3596 §2).
    public static let aaaa = DNSType(rawValue: 28)
    /// A service's host and port (RFC 2782).
    public static let srv = DNSType(rawValue: 33)
    /// Which types a name has, for negative answers (RFC 4034 §4; RFC 6762 §6.1).
    public static let nsec = DNSType(rawValue: 47)
    /// In a question: every type the name has (RFC 1035 §3.2.3 `*`); probes ask for it (RFC 6762 §8.1).
    public static let any = DNSType(rawValue: 255)

    /// The mnemonic (`PTR`), or `TYPE` and the number for others (RFC 3597 §5).
    public var description: String {
        switch rawValue {
        case 1: "A"
        case 12: "PTR"
        case 16: "TXT"
        case 28: "AAAA"
        case 33: "SRV"
        case 47: "NSEC"
        case 255: "ANY"
        default: "TYPE\(rawValue)"
        }
    }
}
