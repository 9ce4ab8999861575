import FerryDNS

/// The names DNS-SD uses around a service type.
enum MDNSNames {
    /// `_services._dns-sd._udp.local`: the meta-query that lists service types (RFC 6763 §9).
    static let serviceTypes = DNSName(stringLiteral: "_services._dns-sd._udp.local")

    /// `_ferry._tcp` → `_ferry._tcp.local`; nil when the type is not a valid name.
    static func service(_ type: String) -> DNSName? {
        try? DNSName(labels: type.split(separator: ".").map(String.init) + ["local"])
    }

    /// The instance `name` of a service type's name.
    static func instance(_ name: String, of service: DNSName) -> DNSName? {
        service.prepending(label: name)
    }

    /// `Name (2)` for the second attempt, as Bonjour and Avahi rename (RFC 6762 §9).
    static func renamed(_ base: String, attempt: Int) -> String {
        guard attempt > 1 else { return base }
        let suffix = " (\(attempt))"
        var head = base
        while (head + suffix).utf8.count > 63 { head.removeLast() }
        return head + suffix
    }

    /// The first label of a name (an instance's user-visible name).
    static func firstLabel(_ name: DNSName) -> String { name.labels.first ?? "" }
}
