// ferry-bench store [--count N] [--batch B] [--dir DIR]
//
// Inserts N documents of ~1 KiB four ways, each into a fresh file in the same run:
//   raw        — one SQLite transaction of plain INSERTs through the C API (the ceiling);
//   replicated — Database.insert of ReplicatedRevisions, B per transaction (the replicator's path);
//   local/batch — Database.save inside inBatch, B per transaction;
//   local/each — Database.save, one transaction per document;
// then point reads per second and peak RSS. All with WAL and synchronous=NORMAL.
import ArgumentParser
import CSQLite
import FerryStore
import Foundation

struct StoreBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "store",
        abstract: "Store inserts (local and replicated) beside a raw SQLite bulk insert, point reads, peak RSS.")

    @Option(help: "Documents to insert.") var count = 100_000
    @Option(help: "Documents per transaction for the batched runs.") var batch = 1000
    @Option(help: "Folder for the temporary databases.") var dir = NSTemporaryDirectory()

    func run() throws {
        let count = self.count, batch = self.batch, dir = self.dir
        func now() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        }

        func cpuSeconds() -> Double {
            var u = rusage()
            getrusage(RUSAGE_SELF.rawValue, &u)
            return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
        }

        var cpu0 = 0.0

        func peakRSSMiB() -> Double {
            var u = rusage()
            getrusage(RUSAGE_SELF.rawValue, &u)
            return Double(u.ru_maxrss) / 1024
        }

        func fresh(_ name: String) -> String {
            let path = (dir as NSString).appendingPathComponent("ferry-bench-\(name)-\(getpid()).db")
            for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
            return path
        }

        func cleanup(_ path: String) { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }

        // Documents: ~1 KiB canonical JSON each, prepared before any timing.
        print("preparing \(count) documents…")
        var props: [[String: JSONValue]] = []
        var bodies: [[UInt8]] = []
        var revs: [String] = []
        props.reserveCapacity(count); bodies.reserveCapacity(count); revs.reserveCapacity(count)
        for i in 0..<count {
            var p: [String: JSONValue] = ["type": "item", "n": .int(Int64(i)), "name": .string("item number \(i)"),
                                          "tags": ["a", "b", "c"], "price": .double(Double(i) * 0.25 + 0.1)]
            let filler = String(repeating: String(i % 10), count: 1024 - CanonicalJSON.encode(p).count - 12)
            p["filler"] = .string(filler)
            let body = CanonicalJSON.encode(p)
            props.append(p)
            bodies.append(body)
            revs.append(RevisionID.make(parent: nil, deleted: false, canonicalBody: body).description)
        }
        let avg = bodies.reduce(0) { $0 + $1.count } / count
        print("average body \(avg) bytes, batch \(batch)")

        func report(_ name: String, _ seconds: Double) -> Double {
            let rate = Double(count) / seconds
            print(name.padding(toLength: 24, withPad: " ", startingAt: 0) + String(format: "%8.2f s  %10.0f docs/s  (CPU %.2f s)", seconds, rate, cpuSeconds() - cpu0))
            return rate
        }

        // 1. The ceiling: raw SQLite, one transaction.
        let rawPath = fresh("raw")
        var raw: OpaquePointer?
        guard sqlite3_open(rawPath, &raw) == SQLITE_OK, let raw else { print("cannot open \(rawPath)"); throw ExitCode(1) }
        sqlite3_exec(raw, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nil, nil, nil)
        sqlite3_exec(raw, "CREATE TABLE docs (doc_key INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, rev_id TEXT NOT NULL, sequence INTEGER NOT NULL, body TEXT NOT NULL)", nil, nil, nil)
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var t0 = now(); cpu0 = cpuSeconds(); cpu0 = cpuSeconds()
        sqlite3_exec(raw, "BEGIN", nil, nil, nil)
        var ins: OpaquePointer?
        sqlite3_prepare_v2(raw, "INSERT INTO docs (doc_id, rev_id, sequence, body) VALUES (?, ?, ?, ?)", -1, &ins, nil)
        for i in 0..<count {
            sqlite3_reset(ins)
            sqlite3_bind_text(ins, 1, "doc-\(i)", -1, transient)
            sqlite3_bind_text(ins, 2, revs[i], -1, transient)
            sqlite3_bind_int64(ins, 3, Int64(i + 1))
            bodies[i].withUnsafeBufferPointer { b in
                b.withMemoryRebound(to: CChar.self) { c in _ = sqlite3_bind_text(ins, 4, c.baseAddress, Int32(c.count), transient) }
            }
            if sqlite3_step(ins) != SQLITE_DONE { print("raw insert failed"); throw ExitCode(1) }
        }
        sqlite3_finalize(ins)
        sqlite3_exec(raw, "COMMIT", nil, nil, nil)
        let ceiling = report("raw (ceiling)", now() - t0)
        sqlite3_close(raw)
        cleanup(rawPath)

        do {
            // 2. Replicated revisions in batches.
            let replPath = fresh("replicated")
            let db = try Database.open(at: replPath)
            t0 = now(); cpu0 = cpuSeconds()
            var i = 0
            while i < count {
                let end = min(count, i + batch)
                let revisions = (i..<end).map { ReplicatedRevision(documentID: "doc-\($0)", history: [revs[$0]], body: bodies[$0]) }
                let results = try db.insert(revisions, fromRemote: nil)
                for r in results { if case .failure(let e) = r { print("insert failed: \(e)"); throw ExitCode(1) } }
                i = end
            }
            let replicated = report("replicated (batched)", now() - t0)
            print(String(format: "  = %.2f× the ceiling", replicated / ceiling))

            // Point reads on that database.
            var rng = SystemRandomNumberGenerator()
            let reads = min(count, 100_000)
            t0 = now(); cpu0 = cpuSeconds()
            for _ in 0..<reads {
                guard try db.documentJSON("doc-\(Int.random(in: 0..<count, using: &rng))") != nil else { print("missing"); throw ExitCode(1) }
            }
            var dt = now() - t0
            print(String(format: "point reads, raw JSON   %10.0f reads/s", Double(reads) / dt))
            t0 = now(); cpu0 = cpuSeconds()
            for _ in 0..<reads {
                guard try db.document("doc-\(Int.random(in: 0..<count, using: &rng))") != nil else { print("missing"); throw ExitCode(1) }
            }
            dt = now() - t0
            print(String(format: "point reads, parsed     %10.0f reads/s", Double(reads) / dt))
            db.close()
            cleanup(replPath)

            // 3. Local saves in batches.
            let batchPath = fresh("local-batch")
            let db2 = try Database.open(at: batchPath)
            t0 = now(); cpu0 = cpuSeconds()
            i = 0
            while i < count {
                let end = min(count, i + batch)
                let start = i
                try db2.inBatch { (b) throws(StoreError) in
                    for k in start..<end { try b.save(Document(id: "doc-\(k)", properties: props[k])) }
                }
                i = end
            }
            let localBatch = report("local saves (batched)", now() - t0)
            print(String(format: "  = %.2f× the ceiling", localBatch / ceiling))
            db2.close()
            cleanup(batchPath)

            // 4. Local saves, one transaction each.
            let eachPath = fresh("local-each")
            let db3 = try Database.open(at: eachPath)
            t0 = now(); cpu0 = cpuSeconds()
            for k in 0..<count { try db3.save(Document(id: "doc-\(k)", properties: props[k])) }
            let localEach = report("local saves (each)", now() - t0)
            print(String(format: "  = %.2f× the ceiling", localEach / ceiling))
            db3.close()
            cleanup(eachPath)
        } catch {
            print("error: \(error)")
            throw ExitCode(1)
        }
        print(String(format: "peak RSS %.0f MiB", peakRSSMiB()))
    }
}
