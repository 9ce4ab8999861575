import FerryDNS

/// A DNS-SD service instance to advertise (RFC 6763 §4): `Name._ferry._tcp.local` with an
/// SRV record pointing at this host's mDNS name and a TXT record of key/value pairs.
public struct ServiceAdvertisement: Sendable, Equatable {
    /// The instance's user-visible name (one DNS label, any UTF-8, up to 63 bytes). Renamed
    /// `Name (2)`, `Name (3)`… if another host already uses it (RFC 6762 §9).
    public var instanceName: String
    /// The service type without the domain, e.g. `_ferry._tcp`.
    public var serviceType: String
    /// The TCP port the service listens on.
    public var port: UInt16
    /// The TXT record's pairs, in order (RFC 6763 §6).
    public var txt: [(key: String, value: String?)]

    /// An advertisement of `serviceType` (`_app._tcp`) named `instanceName` on `port`.
    public init(instanceName: String, serviceType: String, port: UInt16, txt: [(key: String, value: String?)] = []) {
        self.instanceName = instanceName; self.serviceType = serviceType; self.port = port; self.txt = txt
    }

    /// Whether two advertisements have the same name, type, port and TXT pairs in the same order.
    public static func == (a: ServiceAdvertisement, b: ServiceAdvertisement) -> Bool {
        a.instanceName == b.instanceName && a.serviceType == b.serviceType && a.port == b.port
            && a.txt.count == b.txt.count && zip(a.txt, b.txt).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}
