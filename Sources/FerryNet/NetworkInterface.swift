#if canImport(Glibc)
import Glibc
#endif

/// One of the machine's network interfaces with its addresses, as `getifaddrs` reports them.
public struct NetworkInterface: Sendable, Hashable {
    /// Its name (`eth0`, `wlan0`, `lo`).
    public var name: String
    /// Its kernel index (what multicast membership and outgoing-interface options take).
    public var index: UInt32
    /// `IFF_UP` and `IFF_RUNNING`: administratively up and with a carrier.
    public var isRunning: Bool
    /// `IFF_LOOPBACK`.
    public var isLoopback: Bool
    /// `IFF_MULTICAST`.
    public var supportsMulticast: Bool
    /// IPv4 addresses, 4 bytes each.
    public var ipv4: [[UInt8]]
    /// IPv6 addresses, 16 bytes each.
    public var ipv6: [[UInt8]]

    /// Every interface of the machine (of the calling thread's network namespace), by name.
    public static func all() -> [NetworkInterface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var byName: [String: NetworkInterface] = [:]
        var order: [String] = []
        var p: UnsafeMutablePointer<ifaddrs>? = first
        while let i = p {
            p = i.pointee.ifa_next
            guard let n = i.pointee.ifa_name else { continue }
            let name = String(cString: n)
            let flags = i.pointee.ifa_flags
            if byName[name] == nil {
                let running = UInt32(IFF_UP | IFF_RUNNING)
                byName[name] = NetworkInterface(name: name, index: if_nametoindex(n), isRunning: flags & running == running,
                                                isLoopback: flags & UInt32(IFF_LOOPBACK) != 0,
                                                supportsMulticast: flags & UInt32(IFF_MULTICAST) != 0, ipv4: [], ipv6: [])
                order.append(name)
            }
            guard let sa = i.pointee.ifa_addr else { continue }
            switch Int32(sa.pointee.sa_family) {
            case AF_INET:
                let bytes = UnsafeRawPointer(sa).withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                    withUnsafeBytes(of: s.pointee.sin_addr) { Array($0) }
                }
                byName[name]?.ipv4.append(bytes)
            case AF_INET6:
                let bytes = UnsafeRawPointer(sa).withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                    withUnsafeBytes(of: s.pointee.sin6_addr) { Array($0) }
                }
                byName[name]?.ipv6.append(bytes)
            default:
                break
            }
        }
        return order.compactMap { byName[$0] }
    }
}
