import FerryNet

/// The machine's network interfaces, as a replication's conditions see them.
enum NetworkInterfaces {
    /// Whether interface `name` exists, is administratively up and has a carrier
    /// (`IFF_UP` and `IFF_RUNNING`): the "only on Wi-Fi" rule of a Linux box is
    /// `isUp("wlan0")`.
    static func isUp(_ name: String) -> Bool {
        NetworkInterface.all().contains { $0.name == name && $0.isRunning }
    }
}
