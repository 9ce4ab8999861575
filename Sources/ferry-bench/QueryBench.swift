import ArgumentParser
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// `ferry-bench query` — Mango on its SQLite indexes:
//   store — COUNT documents (default 1,000,000) saved in one file, two json indexes built
//           (`k`, unique; `price`), then `Database.find` timed one query at a time: an indexed
//           equality (1 document), an indexed range returning 100, a query sorted on an index
//           with limit 25; p50/p99 of SAMPLES each; then a live query over 100 of them while
//           1,000 writes change one each: commit → emission p50/p99.
//   rest  — REST-COUNT documents (default 100,000) loaded with `_bulk_docs` into a `ferry
//           serve` child and, given `--couchdb URL`, into that CouchDB in the same run; the same
//           `_index`, then the same three `_find` queries driven by `wrk` (random arguments from
//           a Lua script), requests per second side by side.
struct QueryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Mango find on SQLite indexes: in-store latency at 1M documents; _find throughput over REST beside CouchDB.")

    @Option(help: "Documents in the store part (0: skip it).") var count = 1_000_000
    @Option(help: "Queries timed per kind in the store part.") var samples = 2000
    @Option(help: "Documents in the REST part (0: skip it).") var restCount = 100_000
    @Option(help: ArgumentHelp("A CouchDB to measure beside Ferry in the REST part (http://user:password@host:port).", valueName: "url"))
    var couchdb: String?
    @Option(help: "Seconds of each wrk run.") var seconds = 10
    @Option(help: "wrk connections.") var connections = 16
    @Option(help: "wrk threads.") var threads = 2
    @Option(help: "Folder for the temporary data.") var dir = NSTemporaryDirectory()

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Document `i`: a unique `k`, a `price` spread over [0, 10000) by a fixed hash, a few more.
    static func props(_ i: Int) -> [String: JSONValue] {
        ["type": "item", "k": .int(Int64(i)), "group": .int(Int64(i % 1000)), "price": .double(price(i)),
         "name": .string("item number \(i)"), "tags": ["a", "b"]]
    }

    static func price(_ i: Int) -> Double {
        Double((UInt64(i) &* 2_654_435_761) % 1_000_000) / 100
    }

    /// The three queries, with argument `x` in [0, 1).
    static func equality(_ x: Double, _ n: Int) -> String { #"{"selector":{"k":\#(Int(x * Double(n)))}}"# }
    static func range(_ x: Double, _ n: Int) -> String {
        let lo = Int(x * Double(n - 100))
        return #"{"selector":{"k":{"$gte":\#(lo),"$lt":\#(lo + 100)}},"limit":100}"#
    }
    static func sorted(_ x: Double) -> String {
        #"{"selector":{"price":{"$gt":\#(String(format: "%.2f", x * 9000))}},"sort":[{"price":"asc"}],"limit":25}"#
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        print("machine: \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
        if count > 0 { try await storePart() }
        if restCount > 0 { try await restPart() }
    }

    // MARK: The store

    func storePart() async throws {
        let path = (dir as NSString).appendingPathComponent("ferry-bench-query-\(getpid()).ferry")
        defer { for s in ["", "-wal", "-shm"] { unlink(path + s) } }
        let db = try Database.open(at: path)
        defer { db.close() }
        var t = Self.now()
        var i = 0
        while i < count {
            let end = min(count, i + 10_000)
            try db.inBatch { (b) throws(StoreError) in
                for j in i..<end { _ = try b.save(Document(id: String(format: "d%07d", j), properties: Self.props(j))) }
            }
            i = end
        }
        print(String(format: "store    %d documents saved in %.1f s", count, Self.now() - t))
        for field in ["k", "price"] {
            let index = MangoIndex(designDocument: "_design/\(field)", name: field, fields: [(field, "asc")], partialFilter: nil)
            _ = try db.save(Document(id: "_design/\(field)", properties: ["language": "query", "views": .object([field: index.view])]))
            t = Self.now()
            var q = MangoQuery(selector: .field(try MangoFieldPath(field), .condition("$eq", -1)))
            q.useIndex = [field]
            _ = try db.find(q)
            print(String(format: "store    index on %@ built at its first query in %.1f s", field, Self.now() - t))
        }
        var rng = SystemRandomNumberGenerator()
        func measure(_ name: String, _ body: (Double) -> String, expect: (Int) -> Bool) throws {
            var times: [Double] = []
            for _ in 0..<samples {
                let text = body(Double.random(in: 0..<1, using: &rng))
                guard case .object(let o) = try JSONParser.parse(Array(text.utf8)) else { throw ValidationError("bad query") }
                let t = Self.now()
                let query = try MangoQuery(json: o)
                let r = try db.find(query)
                times.append((Self.now() - t) * 1000)
                guard expect(r.documents.count), r.index.designDocument != nil else {
                    throw ValidationError("\(name): \(r.documents.count) documents from \(r.index.name) for \(text)")
                }
            }
            times.sort()
            print(String(format: "store    %@ p50 %.3f ms, p99 %.3f ms (%d queries; parse, plan, read, match)",
                         name.padding(toLength: 34, withPad: " ", startingAt: 0), times[times.count / 2], times[times.count * 99 / 100], samples))
        }
        let n = count
        try measure("indexed equality (1 document)", { Self.equality($0, n) }, expect: { $0 == 1 })
        try measure("indexed range (100 documents)", { Self.range($0, n) }, expect: { $0 == 100 })
        try measure("sorted on an index, limit 25", { Self.sorted($0) }, expect: { $0 == 25 })
        try await live(db)
    }

    /// A live query over 100 documents while 1,000 writes change one of them each: the time
    /// from a write's commit to the live query's emission of the result that includes it.
    func live(_ db: Database) async throws {
        let lo = count / 2
        guard case .object(let o) = try JSONParser.parse(Array(Self.range(Double(lo) / Double(count - 100), count).utf8)) else { return }
        var updates = db.liveQuery(try MangoQuery(json: o)).makeAsyncIterator()
        guard let first = try await updates.next() else { throw ValidationError("the live query ended") }
        let ids = first.documents.map(\.id)
        var times: [Double] = []
        for i in 0..<1000 {
            guard var doc = try db.document(ids[i % ids.count]) else { throw ValidationError("missing \(ids[i % ids.count])") }
            doc.properties["price"] = .double(Double(i))
            _ = try db.save(doc)
            let t = Self.now()
            guard let update = try await updates.next() else { throw ValidationError("the live query ended") }
            times.append((Self.now() - t) * 1000)
            let fresh = try db.find(try MangoQuery(json: o)).documents
            guard update.documents.map(\.revisionID) == fresh.map(\.revisionID) else { throw ValidationError("live result \(i) is not find's") }
        }
        times.sort()
        print(String(format: "store    live query (100 documents), commit → emission: p50 %.3f ms, p99 %.3f ms (1000 writes; every emission equal to a fresh find)",
                     times[times.count / 2], times[times.count * 99 / 100]))
    }

    // MARK: REST, beside CouchDB

    func restPart() async throws {
        var servers = [("ferry", try BenchServer(ferryIn: dir))]
        if let couchdb { servers.append(("couchdb", try BenchServer(url: couchdb))) }
        defer { for (_, s) in servers { s.stop() } }
        var rates: [String: [String: Double]] = [:]
        for (name, server) in servers {
            print("rest     \(name): \(server.label)")
            func request(_ method: String, _ path: String, _ body: [UInt8]? = nil) async throws -> Int {
                try await server.request(method, path, body: body, contentType: "application/json", timeout: 1800).status
            }
            if name != "ferry" {
                _ = try await request("DELETE", "/bench")
                guard try await request("PUT", "/bench") == 201 else { throw ValidationError("PUT /bench on \(name)") }
            }
            var t = Self.now()
            var i = 0
            while i < restCount {
                let end = min(restCount, i + 10_000)
                let docs: [JSONValue] = (i..<end).map { j in
                    var p = Self.props(j)
                    p["_id"] = .string(String(format: "d%07d", j))
                    return .object(p)
                }
                guard try await request("POST", "/bench/_bulk_docs", CanonicalJSON.encode(.object(["docs": .array(docs)]))) == 201 else {
                    throw ValidationError("_bulk_docs on \(name)")
                }
                i = end
            }
            print(String(format: "rest     %@: %d documents loaded in %.1f s", name, restCount, Self.now() - t))
            for field in ["k", "price"] {
                let body = #"{"index":{"fields":["\#(field)"]},"name":"\#(field)","ddoc":"\#(field)","type":"json"}"#
                guard try await request("POST", "/bench/_index", Array(body.utf8)) == 200 else { throw ValidationError("_index on \(name)") }
                t = Self.now()
                guard try await request("POST", "/bench/_find", Array(#"{"selector":{"\#(field)":-1}}"#.utf8)) == 200 else {
                    throw ValidationError("_find on \(name)")
                }
                print(String(format: "rest     %@: index on %@ built at its first query in %.1f s", name, field, Self.now() - t))
            }
            let n = restCount
            let kinds: [(String, String)] = [
                ("equality", #"string.format('{"selector":{"k":%d}}', math.random(0, \#(n - 1)))"#),
                ("range100", #"(function() local lo = math.random(0, \#(n - 101)); return string.format('{"selector":{"k":{"$gte":%d,"$lt":%d}},"limit":100}', lo, lo + 100) end)()"#),
                ("sorted25", #"string.format('{"selector":{"price":{"$gt":%.2f}},"sort":[{"price":"asc"}],"limit":25}', math.random() * 9000)"#),
            ]
            for (kind, lua) in kinds {
                let script = """
                    wrk.method = "POST"
                    wrk.headers["Content-Type"] = "application/json"
                    request = function() return wrk.format(nil, "/bench/_find", nil, \(lua)) end
                    """
                guard let o = try Wrk.run(url: "http://127.0.0.1:\(server.port)/bench/_find", authorization: server.authorization,
                                          threads: threads, connections: connections, seconds: seconds, script: script) else {
                    print("rest     SKIPPED: wrk is not installed (apt-get install wrk)")
                    return
                }
                rates[name, default: [:]][kind] = o.requestsPerSecond
                print(String(format: "rest     %@ %@: %.0f requests/s; %@%@", name, kind, o.requestsPerSecond, o.latency, o.errors.map { "; " + $0 } ?? ""))
            }
        }
        if let f = rates["ferry"], let c = rates["couchdb"] {
            for kind in ["equality", "range100", "sorted25"] {
                if let a = f[kind], let b = c[kind], b > 0 { print(String(format: "rest     %@: Ferry %.1f× CouchDB", kind, a / b)) }
            }
        }
    }
}
