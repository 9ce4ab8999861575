import Foundation

/// `wrk`, the independent C load generator the REST benchmarks drive servers with.
enum Wrk {
    /// What one run measured.
    struct Outcome {
        var requestsPerSecond: Double
        /// wrk's latency line (average, spread, max).
        var latency: String
        /// wrk's line on non-2xx answers or socket errors, if it printed one.
        var errors: String?
    }

    /// The installed binary, if any.
    static let path = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs wrk against `url` with `Authorization: authorization`, and a Lua `script` if given.
    static func run(url: String, authorization: String, threads: Int, connections: Int, seconds: Int,
                    script: String? = nil) throws -> Outcome? {
        guard let path else { return nil }
        var args = ["-t\(threads)", "-c\(connections)", "-d\(seconds)s", "-H", "Authorization: \(authorization)"]
        var scriptPath: String?
        if let script {
            let p = NSTemporaryDirectory() + "ferry-bench-wrk-\(getpid())-\(UInt32.random(in: 0 ... .max)).lua"
            try script.write(toFile: p, atomically: true, encoding: .utf8)
            args += ["-s", p]
            scriptPath = p
        }
        defer { if let scriptPath { unlink(scriptPath) } }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args + [url]
        let o = Pipe()
        p.standardOutput = o
        try p.run()
        let text = String(decoding: o.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let lines = text.split(separator: "\n")
        let rate = lines.first { $0.hasPrefix("Requests/sec:") }.flatMap { Double($0.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let latency = lines.first { $0.contains("Latency") }.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        let errors = lines.first { $0.contains("Non-2xx") || $0.contains("Socket errors") }.map { $0.trimmingCharacters(in: .whitespaces) }
        return Outcome(requestsPerSecond: rate, latency: latency, errors: errors)
    }
}
