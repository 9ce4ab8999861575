// ferry-bench sync [--count N] [--latency-samples N] [--dir DIR] [--batch-size N]
//                  [--max-concurrent-revisions N] [--replication-only] [--index FIELD]
//
// Replication between two peers on loopback, in one run:
//   ceiling  — the store's own batched replicated insert of the same documents (200 per
//              transaction, what a puller does), no network: before the push, between push
//              and pull, and after the pull, each phase compared with the two around it;
//   push     — this process pushes N documents to a `ferry serve` child process;
//   pull     — a fresh database in this process pulls them back from that child;
//   simple   — with --simple-window, the same documents pushed to a fresh `ferry serve` by a
//              client without Ferry's habits (SimplePusher), its server CPU beside the push's;
//   latency  — a continuous push-and-pull between two in-process peers: a document saved (by
//              one of --latency-writers concurrent writers, each waiting for its last),
//              time until it is in the other peer's change feed (p50, p99);
// with the peak RSS of each process while replicating (VmHWM; this process resets its own after
// preparing the documents, through /proc/self/clear_refs; the child: /proc/<pid>/status).
import ArgumentParser
import CJemalloc
import FerryStore
import FerrySync
import Foundation
import Synchronization

struct SyncBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sync",
        abstract: "Push and pull of N × 1 KiB documents between two peer processes, propagation latency, beside the store's insert ceiling.")

    @Option(help: "Documents to replicate.") var count = 100_000
    @Option(help: "Single-document propagations to time.") var latencySamples = 500
    @Option(help: "Concurrent writers of the propagation samples (each waits for its document to arrive before the next).")
    var latencyWriters = 1
    @Option(help: "Folder for the temporary databases.") var dir = NSTemporaryDirectory()
    @Option(help: "Documents per `changes` message (the replicator's batch size).")
    var batchSize = ReplicatorConfiguration.defaultBatchSize
    @Option(help: "Revisions a pull asked for and has not stored before it takes no more `changes`.")
    var maxConcurrentRevisions: Int?
    @Flag(help: "Skip the store ceiling and the latency samples (for profiling push and pull).") var replicationOnly = false
    @Option(help: "A field the pulling database keeps a Mango json index on, registered before the pull (to measure index maintenance).")
    var index: String?
    @Option(help: "Documents the simple client keeps in flight (its push is measured beside Ferry's; 0 = skip it).")
    var simpleWindow = 100

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func vmHWM(_ pid: String = "self") -> Double {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kb = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return 0 }
        return kb / 1024
    }

    /// CPU seconds (user + system) this process has used.
    static func cpuSelf() -> Double {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
    }

    /// CPU seconds (user + system) a child process has used, from /proc/<pid>/stat.
    static func cpu(pid: Int32) -> Double {
        guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = s.lastIndex(of: ")") else { return 0 }
        // Fields after the command name: state is field 3; utime and stime are fields 14 and 15.
        let fields = s[s.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Waits, at most 10 s, until process `pid` has used under 2 ms of CPU in 100 ms: the
    /// background work a phase leaves (a served database's WAL checkpoints) is over before the
    /// next timed phase starts.
    static func quiesce(pid: Int32) {
        var last = cpu(pid: pid)
        for _ in 0..<100 {
            usleep(100_000)
            let now = cpu(pid: pid)
            if now - last < 0.002 { return }
            last = now
        }
    }

    /// Writes every dirty page to disk before a timed phase, so that no phase pays the kernel's
    /// writeback of the files an earlier one (or the untimed preparation) left behind.
    static func settle() { Glibc.sync() }

    func path(_ name: String) -> String {
        let p = (dir as NSString).appendingPathComponent("ferry-bench-sync-\(name)-\(getpid()).db")
        // With the files a `ferry serve` of it leaves beside the database (DaemonEndpoint).
        for suffix in ["", "-wal", "-shm", ".daemon.lock", ".daemon.json", ".replicator.json"] { unlink(p + suffix) }
        return p
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let count = self.count
        print("allocator: jemalloc \(String(cString: ferry_jemalloc_version()))")
        print("preparing \(count) documents of ~1 KiB…")
        func props(_ i: Int) -> [String: JSONValue] {
            ["type": "item", "n": .int(Int64(i)), "name": .string("item number \(i)"), "tags": ["a", "b", "c"],
             "price": .double(Double(i) * 0.25 + 0.1), "text": .string(String(repeating: "lorem ipsum ", count: 75))]
        }

        // Ceilings: the store's batched replicated insert, before the push, between push and
        // pull, and after the pull. Each phase is compared with the two around it: this
        // machine's speed drifts by up to half within one run (docs/performance.md), and a
        // ceiling taken once at the start made the ratios of one run depend on that drift.
        var ceilings: [(rate: Double, cpu: Double)] = []
        func measureCeiling() throws {
            if !replicationOnly { ceilings.append(try ceilingInsert(count: count, props: props)) }
        }
        try measureCeiling()
        var t: Double

        // The source database (local saves, not timed). Closed and reopened so that its WAL is
        // checkpointed into the file now: left to the background checkpointer, copying the
        // preparation's WAL ran on into the timed push, on the pushing process's CPU.
        let sourcePath = path("source")
        let preparing = try Database.open(at: sourcePath)
        try preparing.inBatch { (b) throws(StoreError) in
            for i in 0..<count { try b.save(Document(id: String(format: "doc-%06d", i), properties: props(i))) }
        }
        preparing.close()
        let source = try Database.open(at: sourcePath)

        // Peak RSS from here on is the replication's, not the documents prepared above.
        let fd = open("/proc/self/clear_refs", O_WRONLY)
        if fd >= 0 { _ = write(fd, "5", 1); close(fd) }
        print("RSS after preparing: \(String(format: "%.0f", Self.vmHWM())) MiB")

        // The passive peer: a `ferry serve` child process.
        let (child, url) = try startServe(path("served"))
        // Its files go once it has stopped: it writes its replications file on the way out.
        defer { child.terminate(); child.waitUntilExit(); _ = path("served") }

        var push = ReplicatorConfiguration(database: source, target: url)
        push.type = .push
        push.batchSize = batchSize
        Self.settle()
        t = Self.now()
        var cpu = (Self.cpuSelf(), Self.cpu(pid: child.processIdentifier))
        try await Replicator(configuration: push).run()
        let pushRate = Double(count) / (Self.now() - t)
        let pushCPU = (Self.cpuSelf() - cpu.0, Self.cpu(pid: child.processIdentifier) - cpu.1)
        // Not while the served database still copies the push's WAL.
        Self.quiesce(pid: child.processIdentifier)
        try measureCeiling()

        let pulledPath = path("pulled")
        let pulled = try Database.open(at: pulledPath)
        if let index {
            let definition = MangoIndex(designDocument: "_design/bench", name: index, fields: [(index, "asc")], partialFilter: nil)
            _ = try pulled.save(Document(id: "_design/bench", properties: ["language": "query", "views": .object([index: definition.view])]))
            var q = MangoQuery(selector: .field(try MangoFieldPath(index), .condition("$exists", true)))
            q.useIndex = ["bench", index]
            _ = try pulled.find(q)
            print("pull keeps a Mango index on \(index)")
        }
        var pull = ReplicatorConfiguration(database: pulled, target: url)
        pull.type = .pull
        pull.batchSize = batchSize
        pull.maxConcurrentRevisions = maxConcurrentRevisions
        Self.settle()
        t = Self.now()
        cpu = (Self.cpuSelf(), Self.cpu(pid: child.processIdentifier))
        try await Replicator(configuration: pull).run()
        let pullRate = Double(count) / (Self.now() - t)
        let pullCPU = (Self.cpuSelf() - cpu.0, Self.cpu(pid: child.processIdentifier) - cpu.1)
        // A replicator's batches leave the index entries to the next query: time that one.
        var catchUpLine = ""
        if let index {
            let t = Self.now()
            var q = MangoQuery(selector: .field(try MangoFieldPath(index), .condition("$exists", true)))
            q.useIndex = ["bench", index]
            q.limit = 1
            _ = try pulled.find(q)
            let elapsed = Self.now() - t
            catchUpLine = "first query after the pull (index brought up to date)  \(String(format: "%.0f", elapsed * 1000)) ms, "
                + "\(String(format: "%.1f", elapsed * 1e6 / Double(count))) µs/doc\n"
        }
        let pulledCount = try pulled.documentCount()
        let childRSS = Self.vmHWM(String(child.processIdentifier))
        let selfRSS = Self.vmHWM()
        // Closing checkpoints the pull's WAL, so the ceiling after the pull runs alone.
        pulled.close()
        try measureCeiling()

        // The same documents pushed by a client without Ferry's habits, to a fresh server.
        var simple: (rate: Double, serveCPU: Double, stored: Int)?
        if simpleWindow > 0 {
            let (other, otherURL) = try startServe(path("served-simple"))
            defer { other.terminate(); other.waitUntilExit() }
            let t = Self.now()
            let before = Self.cpu(pid: other.processIdentifier)
            let stored = try await SimplePusher.push(source, to: otherURL, window: simpleWindow)
            simple = (Double(count) / (Self.now() - t), Self.cpu(pid: other.processIdentifier) - before, stored)
        }
        source.close()

        // Latency: two in-process peers, continuous push and pull.
        let aDB = try Database.open(at: path("lat-a")), bDB = try Database.open(at: path("lat-b"))
        var lc = SyncListener.Configuration()
        lc.port = 0
        let listener = try await SyncListener.start(serving: ["b": bDB], configuration: lc)
        var cc = ReplicatorConfiguration(database: aDB, target: listener.url(for: "b"))
        cc.continuous = true
        let r = Replicator(configuration: cc)
        let statuses = r.statusChanges()
        r.start()
        for await s in statuses where s.activity == .idle { break }
        // `latencyWriters` tasks, each saving a document and waiting for it on B before the next.
        let arrivals = Arrivals()
        let feedTask = Task {
            for try await change in bDB.liveChanges(since: bDB.lastSequence) { arrivals.arrived(change.documentID, at: Self.now()) }
        }
        let writers = max(1, latencyWriters), total = replicationOnly ? 0 : latencySamples
        var samples: [Double] = try await withThrowingTaskGroup(of: [Double].self) { group in
            for w in 0..<writers {
                group.addTask {
                    var mine: [Double] = []
                    for i in stride(from: w, to: total, by: writers) {
                        let id = "lat-\(i)", doc = Document(id: id, properties: props(i))
                        let t0 = Self.now()
                        _ = try await aDB.write { (d) throws(StoreError) in try d.save(doc) }
                        mine.append((await arrivals.wait(for: id) - t0) * 1000)
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        feedTask.cancel()
        await r.stop()
        await listener.stop()
        aDB.close(); bDB.close()
        samples.sort()
        let p50 = samples.isEmpty ? 0 : samples[samples.count / 2]
        let p99 = samples.isEmpty ? 0 : samples[min(samples.count - 1, samples.count * 99 / 100)]

        // The mean rate of the ceilings measured just before and just after phase `i`.
        func around(_ i: Int) -> Double {
            ceilings.count > i + 1 ? (ceilings[i].rate + ceilings[i + 1].rate) / 2 : 0
        }
        let ceiling = ceilings.isEmpty ? 0 : ceilings.map(\.rate).reduce(0, +) / Double(ceilings.count)
        let ceilingCPU = ceilings.isEmpty ? 0 : ceilings.map(\.cpu).reduce(0, +) / Double(ceilings.count)
        for name in ["source", "served-simple", "pulled", "lat-a", "lat-b"] { _ = path(name) }
        let simpleLine = simple.map { s in
            "push, simple client (window \(simpleWindow)) \(Int(s.rate)) docs/s, serve CPU \(Int(s.serveCPU * 1e6 / Double(count))) µs/doc "
                + "(\(String(format: "%.2f", s.serveCPU / max(pushCPU.1, 1e-9)))× Ferry's client), stored \(s.stored)\n"
        } ?? ""
        print("""

        workload (\(count) × ~1 KiB docs)              rate
        store ceiling (replicated insert, 200/txn)  \(Int(ceiling)) docs/s  (\(ceilings.map { String(Int($0.rate)) }.joined(separator: ", ") ): before the push, between push and pull, after the pull)
        push  (this process → ferry serve)          \(Int(pushRate)) docs/s  (\(String(format: "%.2f", pushRate / around(0)))× the ceilings around it)
        pull  (ferry serve → this process)          \(Int(pullRate)) docs/s  (\(String(format: "%.2f", pullRate / around(1)))× the ceilings around it)
        \(catchUpLine)\(simpleLine)CPU per document (µs): ceiling \(Int(ceilingCPU * 1e6 / Double(count))); push this \(Int(pushCPU.0 * 1e6 / Double(count))), serve \(Int(pushCPU.1 * 1e6 / Double(count))); pull this \(Int(pullCPU.0 * 1e6 / Double(count))), serve \(Int(pullCPU.1 * 1e6 / Double(count)))
        pulled documents                            \(pulledCount)
        propagation latency, continuous (\(latencySamples) docs, \(writers) writer\(writers > 1 ? "s" : ""))  p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms
        peak RSS: this process \(String(format: "%.0f", selfRSS)) MiB, ferry serve \(String(format: "%.0f", childRSS)) MiB
        """)
    }

    /// The store's batched replicated insert of `count` documents (200 per transaction, as a
    /// puller stores them) into a fresh database: documents per second and this process's CPU
    /// seconds. Only the inserts are timed; each batch's revisions are made just before it, so
    /// that the ceilings measured between the phases add no documents to this process's peak RSS.
    func ceilingInsert(count: Int, props: (Int) -> [String: JSONValue]) throws -> (rate: Double, cpu: Double) {
        let db = try Database.open(at: path("ceiling"))
        defer { db.close(); _ = path("ceiling") }
        Self.settle()
        var seconds = 0.0, cpu = 0.0
        for start in stride(from: 0, to: count, by: 200) {
            let batch = (start..<min(start + 200, count)).map { i in
                ReplicatedRevision(documentID: String(format: "doc-%06d", i), history: ["1-" + String(format: "%040x", i)],
                                   body: CanonicalJSON.encode(.object(props(i))))
            }
            let t = Self.now(), c = Self.cpuSelf()
            _ = try db.insert(batch)
            seconds += Self.now() - t
            cpu += Self.cpuSelf() - c
        }
        return (Double(count) / seconds, cpu)
    }

    /// Starts `ferry serve` (the binary beside this one) on `path`, port 0; returns it and its URL.
    func startServe(_ path: String) throws -> (Process, String) {
        let ferry = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ferry")
        let child = Process()
        child.executableURL = ferry
        child.arguments = ["serve", "--db", path, "--port", "0", "--name", "served", "--allow-anonymous"]
        let out = Pipe()
        child.standardOutput = out
        try child.run()
        var line: [UInt8] = []
        var c: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &c, 1) == 1, c != UInt8(ascii: "\n") { line.append(c) }
        guard let url = String(decoding: line, as: UTF8.self).split(separator: " ").first(where: { $0.hasPrefix("ws://") })?
            .replacingOccurrences(of: "/_blipsync", with: "") else {
            child.terminate()
            throw ValidationError("ferry serve did not start")
        }
        return (child, url)
    }
}

/// When each document arrived in a change feed, for writers waiting on their own.
final class Arrivals: Sendable {
    private struct State {
        var waiting: [String: CheckedContinuation<Double, Never>] = [:]
        var early: [String: Double] = [:]
    }
    private let state = Mutex(State())

    /// The feed saw `id` at time `t`.
    func arrived(_ id: String, at t: Double) {
        let waiter = state.withLock { s -> CheckedContinuation<Double, Never>? in
            if let c = s.waiting.removeValue(forKey: id) { return c }
            s.early[id] = t
            return nil
        }
        waiter?.resume(returning: t)
    }

    /// The time `id` arrived, once it has.
    func wait(for id: String) async -> Double {
        await withCheckedContinuation { (c: CheckedContinuation<Double, Never>) in
            let t = state.withLock { s -> Double? in
                if let t = s.early.removeValue(forKey: id) { return t }
                s.waiting[id] = c
                return nil
            }
            if let t { c.resume(returning: t) }
        }
    }
}
