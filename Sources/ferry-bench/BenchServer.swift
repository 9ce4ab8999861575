import ArgumentParser
import FerryHTTP
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The server a REST benchmark measures: a `ferry serve --data` child with database `bench`
/// and an admin user, or a server given by URL (`http://user:password@host:port`, e.g. a
/// CouchDB) whose database `bench` is made fresh by the caller.
final class BenchServer {
    let port: Int
    let authorization: String
    let label: String
    private var child: Process?
    private let data: String?
    /// Ferry's one HTTP client, one kept-alive connection, as the REST benchmarks always measured.
    private let http = HTTPClient(configuration: BenchServer.clientConfiguration)

    /// One connection per endpoint, no gzip: what `request` uses, and what a benchmark that
    /// needs a second connection (a change feed beside the requests) gives its own client.
    static var clientConfiguration: HTTPClient.Configuration {
        var settings = HTTPClient.Configuration()
        settings.maxConnectionsPerEndpoint = 1
        settings.acceptGzip = false
        return settings
    }

    /// The server's endpoint on the loopback.
    var endpoint: HTTPEndpoint { HTTPEndpoint(secure: false, host: "127.0.0.1", port: port) }

    /// Sends one authenticated request on the kept-alive connection; `contentType` is sent only
    /// when given.
    func request(_ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
                 timeout: Double? = nil) async throws -> (status: Int, body: [UInt8]) {
        var headers: [(name: String, value: String)] = [("Authorization", authorization)]
        if let contentType { headers.append(("Content-Type", contentType)) }
        let r = try await http.execute(HTTPClientRequest(method: method, endpoint: endpoint, target: path, headers: headers,
                                                         body: body, timeout: timeout))
        return (r.status, r.body)
    }

    /// Starts `ferry serve` (the `ferry` binary beside this one) on a fresh data folder in `dir`,
    /// with `serveArguments` after its own.
    init(ferryIn dir: String, serveArguments: [String] = []) throws {
        let data = (dir as NSString).appendingPathComponent("ferry-bench-serve-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try? FileManager.default.removeItem(atPath: data)
        self.data = data
        let ferry = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ferry")
        func runFerry(_ args: [String]) throws {
            let p = Process()
            p.executableURL = ferry
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw ValidationError("ferry \(args.joined(separator: " ")) failed") }
        }
        try runFerry(["db", "create", "--data", data, "bench"])
        try runFerry(["user", "add", "--data", data, "bench", "--password", "bench-secret", "--role", "*=admin"])
        let p = Process()
        p.executableURL = ferry
        p.arguments = ["serve", "--data", data, "--port", "0"] + serveArguments
        let out = Pipe()
        p.standardOutput = out
        // Its log, access-log lines included, is written where a service's goes (a pipe),
        // and drained: /dev/null would hide what writing it costs.
        let err = Pipe()
        p.standardError = err
        try p.run()
        child = p
        let drain = Thread { while !err.fileHandleForReading.availableData.isEmpty {} }
        drain.start()
        var line: [UInt8] = []
        var c: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &c, 1) == 1, c != 10 { line.append(c) }
        guard let url = String(decoding: line, as: UTF8.self).split(separator: " ").first(where: { $0.hasPrefix("http://") }),
              let n = Int(url.dropFirst("http://127.0.0.1:".count).prefix { $0.isNumber }) else {
            p.terminate()
            throw ValidationError("ferry serve did not start: \(String(decoding: line, as: UTF8.self))")
        }
        port = n
        authorization = "Basic " + Data("bench:bench-secret".utf8).base64EncodedString()
        label = "ferry serve --data (pid \(p.processIdentifier)), port \(n)"
    }

    /// A server already running at `url`.
    init(url: String) throws {
        guard let (endpoint, _, user, password) = HTTPEndpoint.split(url), !endpoint.secure, let user else {
            throw ValidationError("--server takes http://user:password@host:port")
        }
        port = endpoint.port
        authorization = "Basic " + Data("\(user):\(password ?? "")".utf8).base64EncodedString()
        label = "\(endpoint)"
        data = nil
    }

    var pid: Int32 { child?.processIdentifier ?? 0 }

    /// Stops the child and removes its data.
    func stop() {
        child?.terminate()
        child?.waitUntilExit()
        child = nil
        if let data { try? FileManager.default.removeItem(atPath: data) }
    }

    deinit { stop() }
}
