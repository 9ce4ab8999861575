import Foundation

/// `wrk`, the independent C load generator the REST benchmarks drive servers with.
enum Wrk {
    /// What one run measured.
    struct Outcome {
        var requestsPerSecond: Double
        /// wrk's latency line (average, spread, max).
        var latency: String
        /// The 99th percentile latency in milliseconds, when the run asked for wrk's distribution.
        var p99Milliseconds: Double?
        /// wrk's line on non-2xx answers or socket errors, if it printed one.
        var errors: String?
    }

    /// A wrk process started by `launch`, running beside the caller.
    struct Running {
        fileprivate let process: Process
        fileprivate let output: Pipe
        fileprivate let scriptPath: String?

        /// Waits for wrk to finish its duration and reads what it measured.
        func wait() -> Outcome {
            // wrk prints only its summary, far less than a pipe holds, so reading after it
            // exits cannot dead-lock.
            process.waitUntilExit()
            defer { if let scriptPath { unlink(scriptPath) } }
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return Wrk.parse(text)
        }
    }

    /// The installed binary, if any.
    static let path = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs wrk against `url` with `Authorization: authorization`, and a Lua `script` if given.
    static func run(url: String, authorization: String, threads: Int, connections: Int, seconds: Int,
                    script: String? = nil, latencyDistribution: Bool = false) throws -> Outcome? {
        try launch(url: url, authorization: authorization, threads: threads, connections: connections,
                   seconds: seconds, script: script, latencyDistribution: latencyDistribution)?.wait()
    }

    /// Starts wrk and returns at once; `Running.wait()` collects its outcome.
    static func launch(url: String, authorization: String, threads: Int, connections: Int, seconds: Int,
                       script: String? = nil, latencyDistribution: Bool = false) throws -> Running? {
        guard let path else { return nil }
        var args = ["-t\(threads)", "-c\(connections)", "-d\(seconds)s", "-H", "Authorization: \(authorization)"]
        if latencyDistribution { args.append("--latency") }
        var scriptPath: String?
        if let script {
            let p = NSTemporaryDirectory() + "ferry-bench-wrk-\(getpid())-\(UInt32.random(in: 0 ... .max)).lua"
            try script.write(toFile: p, atomically: true, encoding: .utf8)
            args += ["-s", p]
            scriptPath = p
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args + [url]
        let o = Pipe()
        p.standardOutput = o
        do { try p.run() } catch {
            if let scriptPath { unlink(scriptPath) }
            throw error
        }
        return Running(process: p, output: o, scriptPath: scriptPath)
    }

    static func parse(_ text: String) -> Outcome {
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let rate = lines.first { $0.hasPrefix("Requests/sec:") }.flatMap { Double($0.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let latency = lines.first { $0.contains("Latency") && !$0.contains("Distribution") } ?? ""
        let errors = lines.first { $0.contains("Non-2xx") || $0.contains("Socket errors") }
        // "99%    1.23ms" in the distribution wrk prints with --latency.
        let p99 = lines.first { $0.hasPrefix("99%") }.flatMap { milliseconds(String($0.dropFirst(3)).trimmingCharacters(in: .whitespaces)) }
        return Outcome(requestsPerSecond: rate, latency: latency, p99Milliseconds: p99, errors: errors)
    }

    /// wrk's duration text ("812.00us", "1.23ms", "2.01s", "1.5m") in milliseconds.
    static func milliseconds(_ text: String) -> Double? {
        for (suffix, scale) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60_000.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }
}
