import ArgumentParser
import FerryServer

/// The limits `ferry serve` protects itself with against clients that misbehave or attack
/// (docs/daemon.md, "Limits"): connections, timeouts, sizes and failed logins. The same keys
/// in the config file and as flags; each has a default that suits a LAN peer.
struct ServeLimits: Equatable {
    var maxConnections = 100_000
    var maxConnectionsPerAddress = 1_000
    var requestTimeout: Double = 30
    var idleTimeout: Double = 60
    var slowReaderTimeout: Double = 60
    var maxDocumentSize = 20 * 1024 * 1024
    var maxRequestSize = 64 * 1024 * 1024
    var maxRequestMemory = 128 * 1024 * 1024
    var maxUploadRate = 16 * 1024 * 1024
    var loginFreeFailures = 5
    var loginMaxDelay: Double = 300

    /// One setting: its config key (the flag is `--KEY`), and how to read and check it.
    struct Key {
        let name: String
        let isInteger: Bool
        let minimum: Double
        let get: (ServeLimits) -> Double
        let set: (inout ServeLimits, Double) -> Void
    }

    static var keys: [Key] { [
        int("max-connections", 1, \.maxConnections),
        int("max-connections-per-address", 1, \.maxConnectionsPerAddress),
        seconds("request-timeout", \.requestTimeout),
        seconds("idle-timeout", \.idleTimeout),
        seconds("slow-reader-timeout", \.slowReaderTimeout),
        int("max-document-size", 1024, \.maxDocumentSize),
        int("max-request-size", 1024, \.maxRequestSize),
        int("max-request-memory", 1_048_576, \.maxRequestMemory),
        int("max-upload-rate", 0, \.maxUploadRate),
        int("login-free-failures", 0, \.loginFreeFailures),
        seconds("login-max-delay", \.loginMaxDelay),
    ] }

    private static func int(_ name: String, _ minimum: Double, _ path: WritableKeyPath<ServeLimits, Int>) -> Key {
        Key(name: name, isInteger: true, minimum: minimum, get: { Double($0[keyPath: path]) },
            set: { $0[keyPath: path] = Int(exactly: $1.rounded()) ?? Int.max })
    }

    private static func seconds(_ name: String, _ path: WritableKeyPath<ServeLimits, Double>) -> Key {
        Key(name: name, isInteger: false, minimum: 1, get: { $0[keyPath: path] }, set: { $0[keyPath: path] = $1 })
    }

    /// Refuses a value below its minimum or out of range.
    func validate() throws {
        for k in Self.keys {
            let v = k.get(self)
            guard v.isFinite, v >= k.minimum, v <= 1e12 else {
                throw ValidationError("--\(k.name) must be at least \(k.isInteger ? String(Int(k.minimum)) : "\(k.minimum) s")")
            }
        }
    }

    /// The daemon's settings with these limits.
    func apply(to config: inout FerryDaemon.Configuration, policy: inout AccessControl.Policy) {
        config.maxConnections = maxConnections
        config.maxConnectionsPerAddress = maxConnectionsPerAddress
        config.requestTimeout = requestTimeout
        config.idleTimeout = idleTimeout
        config.slowReaderTimeout = slowReaderTimeout
        config.databaseOptions.maxDocumentSize = maxDocumentSize
        config.httpLimits.maxBodySize = maxRequestSize
        config.maxRequestMemory = maxRequestMemory
        config.maxUploadRate = maxUploadRate
        policy.failureLimits = FailureThrottle.Limits(freeFailures: loginFreeFailures, maxDelay: .milliseconds(Int64(loginMaxDelay * 1000)))
    }
}

/// The limit flags of `ferry serve`; unset ones keep the config file's value or the default.
struct LimitOptions: ParsableArguments {
    @Option(help: "Connections served at once; more get 503 (default 100000).") var maxConnections: Int?
    @Option(help: "Connections from one client address; more get 503 (default 1000).") var maxConnectionsPerAddress: Int?
    @Option(help: ArgumentHelp("Seconds a request may take to arrive once begun; then 408 (default 30).", valueName: "s")) var requestTimeout: Double?
    @Option(help: ArgumentHelp("Seconds a connection may idle between requests (default 60).", valueName: "s")) var idleTimeout: Double?
    @Option(help: ArgumentHelp("Seconds a client may leave a feed unread before it is dropped (default 60).", valueName: "s")) var slowReaderTimeout: Double?
    @Option(help: ArgumentHelp("Largest document body in bytes; larger ones get 413 (default 20971520).", valueName: "bytes")) var maxDocumentSize: Int?
    @Option(help: ArgumentHelp("Largest HTTP request body in bytes; larger ones get 413 (default 67108864).", valueName: "bytes")) var maxRequestSize: Int?
    @Option(help: ArgumentHelp("Bytes all request bodies in progress may hold; more get 503 (default 134217728).", valueName: "bytes")) var maxRequestMemory: Int?
    @Option(help: ArgumentHelp("Bytes per second of request bodies one client address may send; 0 = no limit (default 16777216).", valueName: "bytes")) var maxUploadRate: Int?
    @Option(help: "Failed logins per address or user before 429 with a growing delay (default 5).") var loginFreeFailures: Int?
    @Option(help: ArgumentHelp("The longest delay a failing address or user is refused for (default 300).", valueName: "s")) var loginMaxDelay: Double?

    /// Overrides `limits` with the flags given.
    func override(_ limits: inout ServeLimits) {
        if let v = maxConnections { limits.maxConnections = v }
        if let v = maxConnectionsPerAddress { limits.maxConnectionsPerAddress = v }
        if let v = requestTimeout { limits.requestTimeout = v }
        if let v = idleTimeout { limits.idleTimeout = v }
        if let v = slowReaderTimeout { limits.slowReaderTimeout = v }
        if let v = maxDocumentSize { limits.maxDocumentSize = v }
        if let v = maxRequestSize { limits.maxRequestSize = v }
        if let v = maxRequestMemory { limits.maxRequestMemory = v }
        if let v = maxUploadRate { limits.maxUploadRate = v }
        if let v = loginFreeFailures { limits.loginFreeFailures = v }
        if let v = loginMaxDelay { limits.loginMaxDelay = v }
    }
}
