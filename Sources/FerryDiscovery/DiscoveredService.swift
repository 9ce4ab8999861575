import FerryDNS

/// A service instance found on the link, resolved to a host, port, addresses and TXT pairs.
public struct DiscoveredService: Sendable, Equatable, CustomStringConvertible {
    /// The instance's user-visible name (the first label of `fullName`).
    public var name: String
    /// The instance's full DNS name (`Name._ferry._tcp.local`).
    public var fullName: DNSName
    /// The SRV target, the host's mDNS name (`host.local`).
    public var hostName: DNSName
    /// The SRV port.
    public var port: UInt16
    /// The host's addresses: dotted IPv4 first, then IPv6.
    public var addresses: [String]
    /// The TXT pairs (keys lowercased; a key without `=` has a nil value, RFC 6763 §6.4).
    public var txt: [String: String?]
    /// The indexes of the interfaces it was seen on.
    public var interfaces: Set<UInt32>

    /// A service with these parts (a browser makes them; tests and relays may too).
    public init(name: String, fullName: DNSName, hostName: DNSName, port: UInt16, addresses: [String],
                txt: [String: String?], interfaces: Set<UInt32>) {
        self.name = name; self.fullName = fullName; self.hostName = hostName; self.port = port
        self.addresses = addresses; self.txt = txt; self.interfaces = interfaces
    }

    /// The value of TXT key `key` (nil when absent or without a value).
    public func value(_ key: String) -> String? { txt[key.lowercased()] ?? nil }

    /// The name, host, port and addresses, for logs.
    public var description: String { "\(name) at \(hostName):\(port) \(addresses)" }
}

/// What a browser reports about the instances of its service type.
public enum DiscoveryEvent: Sendable, Equatable {
    /// An instance became resolvable (SRV, TXT and at least one address).
    case found(DiscoveredService)
    /// A found instance's port, addresses or TXT changed.
    case changed(DiscoveredService)
    /// A found instance is gone: it said goodbye, its records expired, or the interface it
    /// was seen on went away.
    case lost(name: DNSName, reason: String)
}
