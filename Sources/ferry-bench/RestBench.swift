import ArgumentParser
import FerryHTTP
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// `ferry-bench rest` — the daemon's REST API against a `ferry serve --data` child process:
//   get      — keep-alive `GET` of one 1 KiB document, N connections, driven by `wrk` (an
//              independent C load generator; apt-get install wrk), authenticated (HTTP Basic);
//   writes   — N connections (wrk, a Lua script) posting `_bulk_docs` of a few 1 KiB documents
//              without `_id` at once: many small concurrent writes, which group commit batches;
//   bulk     — `POST /_bulk_docs` of 10,000 × 1 KiB documents over one connection, beside the
//              store's own batched save of the same documents in this process (the ceiling);
//   latency  — a `PUT` over one keep-alive connection until the change arrives on a
//              `_changes?feed=continuous` stream held open on another: p50/p99 of 1,000.
struct RestBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rest",
        abstract: "REST API: keep-alive GET rate (wrk), concurrent small _bulk_docs (wrk), one large _bulk_docs vs the store's ceiling, write-to-continuous-feed latency.")

    @Option(help: "Connections for the GET test.") var connections = 64
    @Option(help: "Seconds of the GET test.") var seconds = 10
    @Option(help: "wrk threads (the load generator shares the machine with the server).") var threads = 2
    @Option(help: "Documents per _bulk_docs run.") var bulk = 10_000
    @Option(help: "Bulk runs (the median is reported).") var bulkRuns = 5
    @Option(help: "Connections writing small _bulk_docs at once (the concurrent-writes test; 0 skips it).") var writeConnections = 64
    @Option(help: "Documents per request of the concurrent-writes test.") var writeDocs = 10
    @Option(help: "Latency samples.") var samples = 1000
    @Option(help: "Folder for the temporary data.") var dir = NSTemporaryDirectory()
    @Option(help: ArgumentHelp(
        "Measure this server instead of a ferry serve child (http://user:password@host:port, e.g. a CouchDB); its database `bench` is made fresh.",
        valueName: "url"))
    var server: String?

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        // The GET's connections all come from 127.0.0.1, beside this process's own: the limit per
        // address (1,000 by default) is raised above them, so none is refused.
        let target = try server.map { try BenchServer(url: $0) }
            ?? BenchServer(ferryIn: dir, serveArguments: ["--max-connections-per-address", "\(max(1000, connections + 16))"])
        defer { target.stop() }
        let port = target.port, auth = target.authorization
        let endpoint = target.endpoint
        func request(_ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil) async throws -> (status: Int, body: [UInt8]) {
            try await target.request(method, path, body: body, contentType: contentType)
        }
        if server != nil {
            _ = try await request("DELETE", "/bench")
            let made = try await request("PUT", "/bench")
            guard made.status == 201 else { throw ValidationError("PUT /bench: \(made.status)") }
        }
        print("server: \(target.label); machine: \(ProcessInfo.processInfo.activeProcessorCount) CPUs")

        // 1. Keep-alive GET of a 1 KiB document.
        let body = CanonicalJSON.encode(.object(Self.props(0)))
        let put = try await request("PUT", "/bench/doc", body: body)
        guard put.status == 201 else { throw ValidationError("PUT /bench/doc: \(put.status)") }
        let got = try await request("GET", "/bench/doc")
        print("GET /bench/doc answers \(got.body.count) bytes of JSON")
        if let outcome = try Wrk.run(url: "http://127.0.0.1:\(port)/bench/doc", authorization: auth, threads: min(threads, connections),
                                     connections: connections, seconds: seconds) {
            print("get      \(connections) keep-alive connections, \(seconds) s (wrk -t\(min(threads, connections))): \(String(format: "%.2f", outcome.requestsPerSecond)) requests/s; \(outcome.latency)\(outcome.errors.map { "; " + $0 } ?? "")")
        } else {
            print("get      SKIPPED: wrk is not installed (apt-get install wrk)")
        }

        // 2. Many clients writing small batches at once (what group commit is for): wrk posts
        // `_bulk_docs` of `writeDocs` 1 KiB documents without `_id` on every connection.
        if writeConnections > 0 {
            let put = try await request("PUT", "/bench-writes")
            guard put.status == 201 else { throw ValidationError("PUT /bench-writes: \(put.status)") }
            let docs = CanonicalJSON.encode(.object(["docs": .array((0..<writeDocs).map { .object(Self.props($0)) })]))
            let script = """
            wrk.method = "POST"
            wrk.headers["Content-Type"] = "application/json"
            wrk.body = [[\(String(decoding: docs, as: UTF8.self))]]
            """
            if let outcome = try Wrk.run(url: "http://127.0.0.1:\(port)/bench-writes/_bulk_docs", authorization: auth,
                                         threads: 1, connections: writeConnections, seconds: seconds, script: script,
                                         latencyDistribution: true) {
                print(String(format: "writes   %d connections of _bulk_docs × %d, %d s (wrk -t1): %.0f requests/s = %.0f docs/s; p99 %.2f ms; %@%@",
                             writeConnections, writeDocs, seconds, outcome.requestsPerSecond, outcome.requestsPerSecond * Double(writeDocs),
                             outcome.p99Milliseconds ?? .nan, outcome.latency, outcome.errors.map { "; " + $0 } ?? ""))
            }
        }

        // 3. _bulk_docs beside the store's own batched save of the same documents.
        var bulkRates: [Double] = []
        var ceilingRates: [Double] = []
        for run in 0..<bulkRuns {
            let docs: [JSONValue] = (0..<bulk).map { i in
                var p = Self.props(i)
                p["_id"] = .string(String(format: "r%d-%06d", run, i))
                return .object(p)
            }
            let payload = CanonicalJSON.encode(.object(["docs": .array(docs)]))
            let t = Self.now()
            let r = try await request("POST", "/bench/_bulk_docs", body: payload, contentType: "application/json")
            let elapsed = Self.now() - t
            guard r.status == 201 else { throw ValidationError("_bulk_docs: \(r.status)") }
            bulkRates.append(Double(bulk) / elapsed)

            let path = (dir as NSString).appendingPathComponent("ferry-bench-rest-ceiling-\(getpid())-\(run).ferry")
            let db = try Database.open(at: path)
            let t2 = Self.now()
            try db.inBatch { (b) throws(StoreError) in
                for i in 0..<bulk { _ = try b.save(Document(id: String(format: "r%d-%06d", run, i), properties: Self.props(i))) }
            }
            ceilingRates.append(Double(bulk) / (Self.now() - t2))
            db.close()
            for s in ["", "-wal", "-shm"] { unlink(path + s) }
        }
        let bulkMedian = bulkRates.sorted()[bulkRates.count / 2]
        let ceilingMedian = ceilingRates.sorted()[ceilingRates.count / 2]
        print(String(format: "bulk     _bulk_docs of %d × 1 KiB: median %.0f docs/s over %d runs (%@); the store's batched save: %.0f docs/s (%@) → %.2f× the ceiling",
                     bulk, bulkMedian, bulkRuns, bulkRates.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                     ceilingMedian, ceilingRates.map { String(format: "%.0f", $0) }.joined(separator: ", "), bulkMedian / ceilingMedian))

        // 4. Write → continuous feed latency.
        // The feed on a connection of its own (a second client: one connection each).
        let feedClient = HTTPClient(configuration: BenchServer.clientConfiguration)
        let feed = try await feedClient.stream(HTTPClientRequest(method: "GET", endpoint: endpoint,
                                                                 target: "/bench/_changes?feed=continuous&since=now&heartbeat=10000",
                                                                 headers: [("Authorization", auth)], timeout: 60))
        var pieces = feed.body.makeAsyncIterator()
        var seen: [UInt8] = []
        var latencies: [Double] = []
        for i in 0..<samples {
            let id = "lat-\(i)"
            let t = Self.now()
            let r = try await request("PUT", "/bench/\(id)", body: Array(#"{"i":1}"#.utf8))
            guard r.status == 201 else { throw ValidationError("PUT: \(r.status)") }
            let needle = Array("\"id\":\"\(id)\"".utf8)
            while seen.firstRange(of: needle) == nil {
                guard let piece = try await pieces.next() else { throw ValidationError("the feed ended") }
                seen += piece
            }
            if let r = seen.firstRange(of: needle) { seen.removeFirst(r.upperBound) }
            latencies.append((Self.now() - t) * 1000)
        }
        latencies.sort()
        print(String(format: "latency  PUT → continuous _changes line, %d samples: p50 %.3f ms, p99 %.3f ms, max %.3f ms",
                     samples, latencies[latencies.count / 2], latencies[latencies.count * 99 / 100], latencies[latencies.count - 1]))
    }

    static func props(_ i: Int) -> [String: JSONValue] {
        ["type": "item", "n": .int(Int64(i)), "name": .string("item number \(i)"), "tags": ["a", "b", "c"],
         "price": .double(Double(i) * 0.25 + 0.1), "text": .string(String(repeating: "lorem ipsum ", count: 75))]
    }
}
