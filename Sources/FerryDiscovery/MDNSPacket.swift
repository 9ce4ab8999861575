import FerryDNS
import FerryNet

/// A message the sans-I/O mDNS engines want sent, and where.
public struct MDNSPacket: Sendable, Equatable {
    /// Where a packet goes.
    public enum Destination: Sendable, Equatable {
        /// The mDNS group (224.0.0.251 / ff02::fb, port 5353) on the interface.
        case multicast
        /// One host (a QU answer, or a legacy unicast reply, RFC 6762 §5.4 and §6.7).
        case unicast(SocketAddress)
    }

    /// The message.
    public var message: DNSMessage
    /// The interface to send it out of.
    public var interfaceIndex: UInt32
    /// Multicast or one host.
    public var destination: Destination
}

/// An interface mDNS runs on, as the engines see it: its index and its addresses.
public struct MDNSInterface: Sendable, Equatable {
    /// The kernel index.
    public var index: UInt32
    /// The name, for logs.
    public var name: String
    /// IPv4 addresses (4 bytes each): this host's A records on this interface.
    public var ipv4: [[UInt8]]
    /// IPv6 addresses (16 bytes each): this host's AAAA records on this interface.
    public var ipv6: [[UInt8]]

    /// An interface from its index, name and addresses.
    public init(index: UInt32, name: String, ipv4: [[UInt8]], ipv6: [[UInt8]]) {
        self.index = index; self.name = name; self.ipv4 = ipv4; self.ipv6 = ipv6
    }
}

/// RFC 6762 §10: TTLs a responder gives its records.
public struct MDNSTTLs: Sendable, Equatable {
    /// Records naming this host: SRV, A, AAAA (120 s; also how long a host that vanished
    /// without a goodbye stays listed).
    public var host: UInt32 = 120
    /// The rest: PTR, TXT (75 minutes).
    public var other: UInt32 = 4500
    /// The recommended values.
    public init() {}
}
