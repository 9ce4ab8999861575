import ArgumentParser
import FerryStore
import FerrySync
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// `ferry-bench contention` — one `ferry serve --data` child serving a BLIP pull while 64
// connections write `_bulk_docs` into another of its databases (wrk, a Lua script):
//   alone       — a fresh database in this process pulls N × 1 KiB documents; wrk GETs one
//                 document (p99 from wrk's latency distribution);
//   under load  — the same pull and the same GETs while the writers run.
// Rounds alternate alone / under load, so the two see the same machine.
struct ContentionBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contention",
        abstract: "A BLIP pull and keep-alive GETs from ferry serve, alone and under 64 connections of _bulk_docs.")

    @Option(help: "Documents the pull replicates.") var count = 50_000
    @Option(help: "Connections writing _bulk_docs during the loaded rounds.") var writers = 64
    @Option(help: "Documents per _bulk_docs request.") var docsPerRequest = 10
    @Option(help: "Connections of the GET measurement.") var getConnections = 8
    @Option(help: "Seconds of each GET measurement.") var getSeconds = 5
    @Option(help: "Rounds (each: alone, then under load).") var rounds = 3
    @Option(help: "Folder for the temporary data.") var dir = NSTemporaryDirectory()
    @Option(help: "The served databases' --writer-nice (0 = the ferry serve default).") var writerNice = 0

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        guard Wrk.path != nil else { throw ValidationError("wrk is not installed (apt-get install wrk)") }
        let server = try BenchServer(ferryIn: dir, serveArguments: writerNice > 0 ? ["--writer-nice", "\(writerNice)"] : [])
        defer { server.stop() }
        let port = server.port, auth = server.authorization
        func request(_ method: String, _ path: String, body: [UInt8]? = nil) async throws -> Int {
            try await server.request(method, path, body: body, contentType: "application/json").status
        }
        for db in ["src", "load"] {
            guard try await request("PUT", "/\(db)") == 201 else { throw ValidationError("PUT /\(db) failed") }
        }
        print("server: \(server.label); machine: \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
        print("preparing \(count) documents of ~1 KiB in src…")
        for start in stride(from: 0, to: count, by: 1000) {
            let docs: [JSONValue] = (start..<min(start + 1000, count)).map { i in
                var p = RestBench.props(i)
                p["_id"] = .string(String(format: "doc-%06d", i))
                return .object(p)
            }
            guard try await request("POST", "/src/_bulk_docs", body: CanonicalJSON.encode(.object(["docs": .array(docs)]))) == 201 else {
                throw ValidationError("_bulk_docs into src failed")
            }
        }
        guard try await request("PUT", "/bench/doc", body: CanonicalJSON.encode(.object(RestBench.props(0)))) == 201 else {
            throw ValidationError("PUT /bench/doc failed")
        }

        let bulkBody = CanonicalJSON.encode(.object(["docs": .array((0..<docsPerRequest).map { .object(RestBench.props($0)) })]))
        let bulkScript = """
        wrk.method = "POST"
        wrk.headers["Content-Type"] = "application/json"
        wrk.body = [[\(String(decoding: bulkBody, as: UTF8.self))]]
        """
        // What the storm costs the server, measured alone: its CPU per stored document.
        if let storm = try Wrk.launch(url: "http://127.0.0.1:\(port)/load/_bulk_docs", authorization: auth, threads: 1,
                                      connections: writers, seconds: 4, script: bulkScript) {
            let cpu0 = SyncBench.cpu(pid: server.pid)
            let outcome = storm.wait()
            let cpu = SyncBench.cpu(pid: server.pid) - cpu0
            let docs = outcome.requestsPerSecond * Double(docsPerRequest)
            print(String(format: "write storm alone: %.0f docs/s; ferry serve CPU %.1f µs per document stored",
                         docs, docs > 0 ? cpu * 1e6 / (docs * 4) : .nan))
        }
        let getURL = "http://127.0.0.1:\(port)/bench/doc"
        var pullRatios: [Double] = [], p99Ratios: [Double] = []
        for round in 1...rounds {
            let aloneGet = try Wrk.run(url: getURL, authorization: auth, threads: 1, connections: getConnections,
                                       seconds: getSeconds, latencyDistribution: true)
            let alonePull = try await pull(port: port, tag: "alone-\(round)")

            // The writers run through the pull and the GETs; the rest of their time is not measured.
            let loadSeconds = Int(alonePull.seconds * 4) + getSeconds + 10
            guard let load = try Wrk.launch(url: "http://127.0.0.1:\(port)/load/_bulk_docs", authorization: auth, threads: 1,
                                            connections: writers, seconds: loadSeconds, script: bulkScript) else { break }
            // Writers at full rate before the measurement starts (a benchmark's warm-up, not a test's wait).
            try await Task.sleep(for: .seconds(2))
            let loadedPull = try await pull(port: port, tag: "loaded-\(round)")
            let loadedGet = try Wrk.run(url: getURL, authorization: auth, threads: 1, connections: getConnections,
                                        seconds: getSeconds, latencyDistribution: true)
            let writes = load.wait()

            let pullRatio = loadedPull.rate / alonePull.rate
            pullRatios.append(pullRatio)
            let p99Alone = aloneGet?.p99Milliseconds ?? .nan, p99Loaded = loadedGet?.p99Milliseconds ?? .nan
            p99Ratios.append(p99Loaded / p99Alone)
            print(String(format: "round %d: pull %.0f alone, %.0f under load (%.2f×); GET p99 %.2f ms alone, %.2f ms under load (%.2f×), %.0f vs %.0f requests/s; writers %.0f docs/s%@",
                                round, alonePull.rate, loadedPull.rate, pullRatio, p99Alone, p99Loaded, p99Loaded / p99Alone,
                                aloneGet?.requestsPerSecond ?? 0, loadedGet?.requestsPerSecond ?? 0,
                                writes.requestsPerSecond * Double(docsPerRequest), writes.errors.map { "; " + $0 } ?? ""))
        }
        let median = { (xs: [Double]) in xs.sorted()[xs.count / 2] }
        print(String(format: "median: pull under load %.2f× alone (target ≥ 0.70); GET p99 under load %.2f× alone (target ≤ 3)",
                     median(pullRatios), median(p99Ratios)))
    }

    /// Pulls database `src` into a fresh database in this process; returns docs/s and seconds.
    func pull(port: Int, tag: String) async throws -> (rate: Double, seconds: Double) {
        let path = (dir as NSString).appendingPathComponent("ferry-bench-contention-\(getpid())-\(tag).db")
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        let db = try Database.open(at: path)
        defer {
            db.close()
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        }
        var config = ReplicatorConfiguration(database: db, target: "ws://bench:bench-secret@127.0.0.1:\(port)/src")
        config.type = .pull
        let t = RestBench.now()
        try await Replicator(configuration: config).run()
        let seconds = RestBench.now() - t
        let pulled = try db.documentCount()
        guard pulled == count else { throw ValidationError("pulled \(pulled) of \(count) documents") }
        return (Double(count) / seconds, seconds)
    }
}
