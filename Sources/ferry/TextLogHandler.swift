import Foundation
import Logging

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

/// The current second as `YYYY-MM-DDTHH:MM:SS+0000`, formatted once per second.
enum LogTimestamp {
    private static let cache = NSLock()
    nonisolated(unsafe) private static var second = 0
    nonisolated(unsafe) private static var text = ""
    // nonisolated(unsafe): `second` and `text` are read and written only with `cache` held.

    static func current() -> String {
        var t = time(nil)
        cache.lock()
        defer { cache.unlock() }
        if Int(t) != second {
            var tm = tm()
            gmtime_r(&t, &tm)
            text = String(format: "%04d-%02d-%02dT%02d:%02d:%02d+0000", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                          tm.tm_hour, tm.tm_min, tm.tm_sec)
            second = Int(t)
        }
        return text
    }
}
