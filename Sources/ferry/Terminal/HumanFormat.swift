/// Numbers, sizes, rates and durations written for people reading a terminal: short, fixed
/// units, no locale (the same bytes on every machine, so tests can compare them).
enum HumanFormat {
    /// `1234567` → `1,234,567`.
    static func count<N: BinaryInteger>(_ n: N) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return n < 0 ? "-" + out : out
    }

    /// `4404019` → `4.2 MiB`: binary units, one decimal below 10 of a unit.
    static func bytes(_ n: Int64) -> String {
        guard n >= 1024 else { return "\(max(n, 0)) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(n) / 1024
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return "\(oneDecimalBelowTen(value)) \(units[unit])"
    }

    /// Documents per second: `812/s`, `2.5/s`, `12.3k/s`. The unit word is the caller's.
    static func rate(_ perSecond: Double) -> String {
        guard perSecond.isFinite, perSecond > 0 else { return "0" }
        if perSecond >= 10_000 { return "\(oneDecimalBelowTen(perSecond / 1000))k" }
        if perSecond >= 10 { return count(Int(perSecond.rounded())) }
        return oneDecimal(perSecond)
    }

    /// `5s`, `3m 12s`, `2h 05m`, `3d 4h`: two units at most, as an ETA or uptime wants.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "?" }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(twoDigits(s % 60))s" }
        if s < 86_400 { return "\(s / 3600)h \(twoDigits(s % 3600 / 60))m" }
        return "\(s / 86_400)d \(s % 86_400 / 3600)h"
    }

    private static func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    private static func oneDecimal(_ v: Double) -> String {
        let tenths = Int((v * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// One decimal while the integer part is a single digit (`4.2`), none after (`42`, `420`).
    private static func oneDecimalBelowTen(_ v: Double) -> String {
        v < 9.95 ? oneDecimal(v) : "\(Int(v.rounded()))"
    }
}
