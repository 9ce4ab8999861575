import Glibc
import Logging
import Synchronization

/// `ferry serve`'s text log lines, in swift-log's `StreamLogHandler` layout —
/// `2026-11-29T07:45:14+0000 info ferry.request: bytes=251 peer=127.0.0.1 [FerryServer] GET /db 200`
/// (UTC; metadata sorted) — written through `LogOutput`'s buffer instead of one `write(2)`
/// per line.
struct TextLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, level: Logger.Level) {
        self.label = label
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // The common case (an access-log line) has only the event's own metadata: no merge.
        var all = event.metadata ?? [:]
        if !metadata.isEmpty || metadataProvider != nil {
            all = metadata
            if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
            if let m = event.metadata { all.merge(m) { _, new in new } }
        }
        var line: [UInt8] = []
        line.reserveCapacity(160)
        line += LogTimestamp.current().utf8
        line.append(32)
        line += event.level.rawValue.utf8
        line.append(32)
        line += label.utf8
        line.append(58)
        for key in all.keys.sorted() {
            guard let value = all[key] else { continue }
            line.append(32)
            line += key.utf8
            line.append(61)
            line += value.description.utf8
        }
        line += " [".utf8
        line += event.source.utf8
        line += "] ".utf8
        line += event.message.description.utf8
        line.append(10)
        LogOutput.standardError.write(line, urgent: event.level >= .notice)
    }
}

/// The UTC times on log lines (RFC 3339), written digit by digit: the C library's `strftime`
/// would read the locale.
enum LogTimestamp {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    /// The current second as `YYYY-MM-DDTHH:MM:SS+0000`, formatted once per second.
    static func current() -> String {
        let t = time(nil)
        if let hit = cache.withLock({ $0.second == Int(t) ? $0.text : nil }) { return hit }
        let text = format(t, zone: "+0000")
        cache.withLock { $0 = (Int(t), text) }
        return text
    }

    /// `2026-11-30T01:02:03` for `seconds` since 1970, then `.mmm` when `milliseconds` is
    /// given, then `zone`.
    static func format(_ seconds: time_t, milliseconds: Int? = nil, zone: String) -> String {
        var t = seconds
        var p = Glibc.tm()
        gmtime_r(&t, &p)
        var s = "\(pad(Int(p.tm_year) + 1900, 4))-\(pad(Int(p.tm_mon) + 1, 2))-\(pad(Int(p.tm_mday), 2))"
        s += "T\(pad(Int(p.tm_hour), 2)):\(pad(Int(p.tm_min), 2)):\(pad(Int(p.tm_sec), 2))"
        if let milliseconds { s += ".\(pad(milliseconds, 3))" }
        return s + zone
    }

    private static func pad(_ n: Int, _ width: Int) -> String {
        let digits = String(n)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
