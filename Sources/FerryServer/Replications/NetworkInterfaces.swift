#if canImport(Glibc)
import Glibc
#endif

/// The machine's network interfaces, as a replication's conditions see them.
enum NetworkInterfaces {
    /// Whether interface `name` exists, is administratively up and has a carrier
    /// (`IFF_UP` and `IFF_RUNNING`): the "only on Wi-Fi" rule of a Linux box is
    /// `isUp("wlan0")`.
    static func isUp(_ name: String) -> Bool {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return false }
        defer { freeifaddrs(list) }
        let wanted = UInt32(IFF_UP | IFF_RUNNING)
        var p: UnsafeMutablePointer<ifaddrs>? = first
        while let i = p {
            if let n = i.pointee.ifa_name, String(cString: n) == name, i.pointee.ifa_flags & wanted == wanted { return true }
            p = i.pointee.ifa_next
        }
        return false
    }
}
