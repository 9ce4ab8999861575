import ArgumentParser
import FerryServer
import FerryStore

/// `ferry serve`'s cross-origin settings as the config file's `cors` object and the flags
/// set them (docs/daemon.md, "CORS"): CouchDB's `[cors]` section.
struct CORSSettings: Equatable {
    var origins: [String] = []
    var credentials = false
    var methods: [String]?
    var headers: [String] = []
    var maxAge = 600

    /// A bad `cors` setting.
    struct Invalid: Error { let message: String }

    /// The daemon's policy: nil (CORS off) without origins.
    var policy: CORSPolicy? {
        guard !origins.isEmpty else { return nil }
        var p = CORSPolicy(origins: origins, credentials: credentials)
        if let methods { p.methods = methods }
        p.headers = headers
        p.maxAge = maxAge
        return p
    }

    /// Applies the config file's `cors` object (`origins`, `credentials`, `methods`,
    /// `headers`, `max-age`).
    mutating func apply(_ value: JSONValue) throws(Invalid) {
        guard let o = value.objectValue else { throw Invalid(message: "\"cors\" must be an object") }
        func strings(_ key: String) throws(Invalid) -> [String]? {
            guard let v = o[key] else { return nil }
            guard let a = v.arrayValue, a.allSatisfy({ $0.stringValue != nil }) else {
                throw Invalid(message: "\"cors.\(key)\" must be an array of strings")
            }
            return a.compactMap(\.stringValue)
        }
        for key in o.keys where !["origins", "credentials", "methods", "headers", "max-age"].contains(key) {
            throw Invalid(message: "unknown key \"cors.\(key)\" (known: credentials, headers, max-age, methods, origins)")
        }
        origins = try strings("origins") ?? origins
        methods = try strings("methods") ?? methods
        headers = try strings("headers") ?? headers
        if let c = o["credentials"] {
            guard case .bool(let b) = c else { throw Invalid(message: "\"cors.credentials\" must be true or false") }
            credentials = b
        }
        if let m = o["max-age"] {
            guard let n = m.intValue else { throw Invalid(message: "\"cors.max-age\" must be a number of seconds") }
            maxAge = Int(n)
        }
    }

    /// Checks what a file or the flags gave.
    func validate() throws {
        for o in origins where o != "*" && !(o.hasPrefix("http://") || o.hasPrefix("https://")) {
            throw ValidationError("--cors-origin \(o): an origin is * or scheme://host[:port]")
        }
        if maxAge < 0 { throw ValidationError("--cors-max-age must be 0 or more seconds") }
        if (methods ?? []).isEmpty && methods != nil { throw ValidationError("--cors-method needs at least one method") }
    }
}

/// The flags of `CORSSettings`.
struct CORSOptions: ParsableArguments {
    @Option(name: .customLong("cors-origin"), help: ArgumentHelp(
        "Let web pages from this origin (scheme://host[:port], or * for any) call the REST API; repeatable. Turns CORS on.",
        valueName: "origin"))
    var origins: [String] = []
    @Flag(name: .customLong("cors-credentials"), help: "Let those pages send cookies and credentials (Access-Control-Allow-Credentials).")
    var credentials = false
    @Option(name: .customLong("cors-method"), help: ArgumentHelp("A method a page may use (default: CouchDB's list); repeatable.", valueName: "method"))
    var methods: [String] = []
    @Option(name: .customLong("cors-header"), help: ArgumentHelp("A request header allowed beyond CouchDB's standard ones; repeatable.", valueName: "name"))
    var headers: [String] = []
    @Option(name: .customLong("cors-max-age"), help: ArgumentHelp("Seconds a browser may cache a preflight's answer.", valueName: "seconds"))
    var maxAge: Int?

    /// Applies the flags given over `settings` (the config file's or the defaults).
    func override(_ settings: inout CORSSettings) {
        if !origins.isEmpty { settings.origins = origins }
        if credentials { settings.credentials = true }
        if !methods.isEmpty { settings.methods = methods.map { $0.uppercased() } }
        if !headers.isEmpty { settings.headers = headers }
        if let maxAge { settings.maxAge = maxAge }
    }
}
