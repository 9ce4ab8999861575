import ArgumentParser
import FerryNet
import FerryServer
import FerryStore
import FoundationEssentials
import Logging

/// What `ferry serve` runs with: the defaults, then the `--config` file's keys, then the
/// flags given on the command line (docs/daemon.md, "Config file").
struct ServeSettings {
    var host = "127.0.0.1"
    var port = 4984
    var data: String?
    var db = "ferry.db"
    var name: String?
    var users: String?
    var allowAnonymous = false
    var anonymousRole = "writer"
    var heartbeat: Double = 30
    var retryMaxWait: Double = 5
    var sessionTimeout = 600
    var cookieSameSite = "lax"
    var writerNice = 0
    var tlsCert: String?
    var tlsKey: String?
    var clientCA: String?
    var replicate: [String] = []
    var logFormat = "text"
    var logLevel = "info"
    var conflictPolicy = "resolve"
    var limits = ServeLimits()
    var cors = CORSSettings()

    /// The keys a config file may have; any other is refused (a typo would otherwise be
    /// silently ignored, and the daemon run with a default the operator meant to change).
    static let fileKeys: Set<String> = Set(ServeLimits.keys.map(\.name)).union(["host", "port", "data", "db", "name", "users", "allow-anonymous", "anonymous-role",
                                        "heartbeat", "retry-max-wait", "session-timeout", "tls", "replicate", "log-format", "log-level",
                                        "conflict-policy", "cors", "cookie-same-site", "writer-nice"])
    static let tlsKeys: Set<String> = ["cert", "key", "client-ca"]

    /// Applies a JSON config file: its keys and their types are checked, then its values set.
    mutating func apply(file path: String) throws {
        guard let bytes = FileManager.default.contents(atPath: path) else { throw ValidationError("--config \(path): cannot read the file") }
        let top: [String: JSONValue]
        do { top = try JSONParser.parseObject(Array(bytes), sizeLimit: bytes.count + 1) } catch {
            throw ValidationError("--config \(path): not a JSON object: \(error)")
        }
        for key in top.keys where !Self.fileKeys.contains(key) {
            throw ValidationError("--config \(path): unknown key \(key.debugDescription) (known: \(Self.fileKeys.sorted().joined(separator: ", ")))")
        }
        if let c = top["cors"] {
            do { try cors.apply(c) } catch { throw ValidationError("--config \(path): \(error.message)") }
        }
        if let tls = top["tls"] {
            guard let o = tls.objectValue else { throw ValidationError("--config \(path): \"tls\" must be an object") }
            for key in o.keys where !Self.tlsKeys.contains(key) {
                throw ValidationError("--config \(path): unknown key \"tls.\(key)\" (known: cert, key, client-ca)")
            }
        }
        // Every value's type is checked here, so the reads below can take what is there.
        let limitKeys = Set(ServeLimits.keys.map(\.name))
        for (key, value) in top {
            let ok: Bool
            switch (key, value) {
            case ("port", .int), ("heartbeat", .int), ("heartbeat", .double), ("retry-max-wait", .int), ("retry-max-wait", .double), ("session-timeout", .int), ("writer-nice", .int),
                 ("allow-anonymous", .bool), ("tls", .object), ("cors", .object): ok = true
            case ("replicate", .array(let a)): ok = a.allSatisfy { if case .string = $0 { true } else { false } }
            case (let k, .int) where limitKeys.contains(k): ok = true
            case (let k, .double) where limitKeys.contains(k): ok = !(ServeLimits.keys.first { $0.name == k }?.isInteger ?? true)
            case (let k, _) where limitKeys.contains(k): ok = false
            case ("port", _), ("session-timeout", _), ("heartbeat", _), ("retry-max-wait", _), ("writer-nice", _), ("allow-anonymous", _), ("replicate", _), ("tls", _), ("cors", _): ok = false
            case (_, .string): ok = true
            default: ok = false
            }
            if !ok { throw ValidationError("--config \(path): \(key.debugDescription) has the wrong type") }
        }
        func string(_ key: String) -> String? { top[key]?.stringValue }
        func int(_ key: String) -> Int? { top[key]?.intValue.flatMap { Int(exactly: $0) } }
        host = string("host") ?? host
        port = int("port") ?? port
        data = string("data") ?? data
        db = string("db") ?? db
        name = string("name") ?? name
        users = string("users") ?? users
        if case .bool(let b)? = top["allow-anonymous"] { allowAnonymous = b }
        anonymousRole = string("anonymous-role") ?? anonymousRole
        heartbeat = top["heartbeat"]?.doubleValue ?? heartbeat
        retryMaxWait = top["retry-max-wait"]?.doubleValue ?? retryMaxWait
        sessionTimeout = int("session-timeout") ?? sessionTimeout
        cookieSameSite = string("cookie-same-site") ?? cookieSameSite
        writerNice = int("writer-nice") ?? writerNice
        let tls = top["tls"]?.objectValue ?? [:]
        tlsCert = tls["cert"]?.stringValue ?? tlsCert
        tlsKey = tls["key"]?.stringValue ?? tlsKey
        clientCA = tls["client-ca"]?.stringValue ?? clientCA
        if case .array(let items)? = top["replicate"] { replicate = items.compactMap(\.stringValue) }
        logFormat = string("log-format") ?? logFormat
        logLevel = string("log-level") ?? logLevel
        conflictPolicy = string("conflict-policy") ?? conflictPolicy
        for k in ServeLimits.keys {
            if let v = top[k.name]?.doubleValue { k.set(&limits, v) }
        }
    }

    /// Checks the merged settings (a file's values need the same checks as flags).
    func validate() throws {
        if Role(name: anonymousRole) == nil { throw ValidationError("anonymous-role is reader, writer or admin") }
        if data != nil && name != nil { throw ValidationError("--name names the one --db file; with --data the file names are the database names") }
        if data != nil { for p in replicate where Serve.splitNamed(p) == nil { throw ValidationError("with --data, --replicate takes NAME=URL") } }
        if heartbeat < 0 { throw ValidationError("--heartbeat must be 0 (off) or positive") }
        if retryMaxWait < 1 { throw ValidationError("--retry-max-wait must be at least 1 second") }
        if !(1...31_536_000).contains(sessionTimeout) { throw ValidationError("--session-timeout must be 1…31536000 seconds") }
        if !(0...19).contains(writerNice) { throw ValidationError("--writer-nice must be 0…19") }
        if SessionCookie.SameSite(rawValue: cookieSameSite) == nil { throw ValidationError("--cookie-same-site is lax, strict, none or unset") }
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0…65535") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if clientCA != nil && tlsCert == nil { throw ValidationError("--client-ca needs --tls-cert and --tls-key") }
        if logFormat != "text" && logFormat != "json" { throw ValidationError("--log-format is text or json") }
        try limits.validate()
        try cors.validate()
        if ConflictPolicy(rawValue: conflictPolicy) == nil { throw ValidationError("--conflict-policy is resolve or keep") }
        if Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level is one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    /// The listener's TLS settings, or nil for plain ws://.
    var tls: TLSServerConfiguration? {
        guard let tlsCert, let tlsKey else { return nil }
        var c = TLSServerConfiguration(certificateChain: .file(tlsCert), privateKey: .file(tlsKey))
        if let clientCA { c.clientAuthentication = .required(trusting: .file(clientCA)) }
        return c
    }

    /// Whether a long option was given on the command line (`--name V` or `--name=V`): only
    /// those override the config file, so a file's value is not undone by a flag's default.
    static func given(_ option: String, in arguments: [String] = CommandLine.arguments) -> Bool {
        arguments.contains { $0 == option || $0.hasPrefix(option + "=") }
    }
}
