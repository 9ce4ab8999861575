import FerryStore
import FoundationEssentials
import Glibc
import Logging

/// A swift-log handler that writes one JSON object per line to standard error
/// (`ferry serve --log-format json`): `{"ts":…,"level":…,"label":…,"msg":…, metadata…}`, for
/// log collectors that parse lines rather than read prose. Keys come in that order, then the
/// metadata's in sorted order; a metadata key that would shadow one of the four is prefixed
/// with `meta.`. Lines go through `LogOutput` (batched; `notice` and above at once).
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    private static let reserved: Set<String> = ["ts", "level", "label", "msg"]

    init(label: String, level: Logger.Level) {
        self.label = label
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let m = event.metadata { all.merge(m) { _, new in new } }
        var line = Array(#"{"ts":"#.utf8)
        line += CanonicalJSON.encode(.string(Self.timestamp()))
        line += Array(#","level":"#.utf8) + CanonicalJSON.encode(.string(event.level.rawValue))
        line += Array(#","label":"#.utf8) + CanonicalJSON.encode(.string(label))
        line += Array(#","msg":"#.utf8) + CanonicalJSON.encode(.string(event.message.description))
        for key in all.keys.sorted() {
            guard let value = all[key] else { continue }
            let name = Self.reserved.contains(key) ? "meta." + key : key
            line += Array(",".utf8) + CanonicalJSON.encode(.string(name)) + Array(":".utf8) + CanonicalJSON.encode(Self.json(value))
        }
        line += Array("}\n".utf8)
        LogOutput.standardError.write(line, urgent: event.level >= .notice)
    }

    private static func json(_ v: Logger.Metadata.Value) -> JSONValue {
        switch v {
        case .string(let s): return .string(s)
        case .stringConvertible(let c): return .string(c.description)
        case .array(let a): return .array(a.map(json))
        case .dictionary(let d): return .object(d.mapValues(json))
        }
    }

    /// RFC 3339 in UTC with milliseconds.
    private static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        return LogTimestamp.format(tv.tv_sec, milliseconds: Int(tv.tv_usec / 1000), zone: "Z")
    }
}
