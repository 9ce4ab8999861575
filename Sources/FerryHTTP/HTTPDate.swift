#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The `Date` field value of a response (RFC 9110 §5.6.7, IMF-fixdate:
/// `Sun, 06 Nov 1994 08:49:37 GMT`), which an origin server with a clock must send (§6.6.1) and
/// which clients use to age cached answers. Formatted once per second and shared: a busy server
/// writes tens of thousands of answers a second.
public enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    /// The field value for now.
    public static func now() -> String {
        let second = Int(time(nil))
        if let hit = cache.withLock({ $0.second == second ? $0.text : nil }) { return hit }
        let text = format(secondsSince1970: second)
        cache.withLock { $0 = (second, text) }
        return text
    }

    /// The IMF-fixdate of `seconds` since 1970 (UTC), without the C locale's say in it.
    /// `dateSeparator` "-" gives the cookie form CouchDB (mochiweb) writes in `Expires`:
    /// `Sat, 28-Nov-2026 18:48:33 GMT`.
    public static func format(secondsSince1970 seconds: Int, dateSeparator: String = " ") -> String {
        var t = time_t(seconds)
        var p = tm()
        gmtime_r(&t, &p)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(p.tm_wday) % 7]), \(two(p.tm_mday))\(dateSeparator)\(months[Int(p.tm_mon) % 12])\(dateSeparator)\(p.tm_year + 1900) "
            + "\(two(p.tm_hour)):\(two(p.tm_min)):\(two(p.tm_sec)) GMT"
    }
}
