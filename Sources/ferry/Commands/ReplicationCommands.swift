import ArgumentParser
import FerryHTTP
import FerryServer
import FerryStore
import FerrySync
import FoundationEssentials

/// `ferry replication`: managed replications of a daemon (Protocol/replicator.md), through
/// the running daemon's REST API, or on its data's replications file when none runs (the
/// daemon starts them when it starts).
struct ReplicationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replication",
        abstract: "Add, list, show, pause, resume and remove a daemon's managed replications.",
        discussion: """
            Examples:
              ferry replication add notes ws://laptop:4984/notes --data ~/ferry --continuous
              ferry replication add notes ws://phone:4984/notes --data ~/ferry --every 15m --budget 30s --when-interface wlan0
              ferry replication ls --data ~/ferry
              ferry replication pause notes-phone --data ~/ferry
            """,
        subcommands: [Add.self, List.self, Show.self, Pause.self, Resume.self, Remove.self])

    /// `ferry replication add NAME URL`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a replication of local database NAME with the peer at URL; it starts at once and after every restart.")

        @Argument(help: "The local database.") var database: String
        @Argument(help: "The peer's database URL: http(s)://host:port/db for a CouchDB (its replication protocol), ws(s)://host:port/db for BLIP peers (credentials in it are kept, never shown).") var peer: String
        @Option(name: .customLong("protocol"), help: ArgumentHelp("automatic (by the URL's scheme), couchdb, or blip (a Sync Gateway given as http://).", valueName: "name"))
        var peerProtocol: String?
        @Option(help: ArgumentHelp("Replicate only documents matching this Mango selector (JSON), both ways.", valueName: "json")) var selector: String?
        @OptionGroup var daemon: DaemonOptions
        @Option(help: "The replication's ID (default: DATABASE-HOST-PORT).") var id: String?
        @Flag(help: "Only push local changes.") var push = false
        @Flag(help: "Only pull the peer's changes.") var pull = false
        @Flag(help: "Keep running, propagating changes as they happen.") var continuous = false
        @Option(name: .customLong("doc-id"), help: "Only this document (repeatable).") var docIDs: [String] = []
        @Option(help: "A pull filter registered on the peer.") var filter: String?
        @Option(name: .customLong("param"), help: ArgumentHelp("A parameter of --filter (repeatable).", valueName: "key=value")) var params: [String] = []
        @Option(help: "Basic user name for the peer.") var peerUser: String?
        @Option(help: "The password for --peer-user (stored, never shown).") var peerPassword: String?
        @Option(help: ArgumentHelp("Trust only a peer certificate with this SHA-256 (hex; repeatable).", valueName: "sha256")) var pin: [String] = []
        @Option(help: ArgumentHelp("Who wins a pulled conflict: default, local or remote.", valueName: "policy")) var conflicts = "default"
        @Option(help: "Documents per batch.") var batchSize: Int?
        @Option(help: ArgumentHelp("Run push-and-pull periodically, e.g. 15m (instead of one-shot or continuous).", valueName: "duration")) var every: String?
        @Option(help: ArgumentHelp("The period in background mode (`ferry policy mode background`, SIGUSR2).", valueName: "duration")) var backgroundEvery: String?
        @Option(help: ArgumentHelp("Stop each periodic run after this long, checkpointed; the next run goes on from there.", valueName: "duration")) var budget: String?
        @Option(name: .customLong("when-interface"), help: ArgumentHelp("Run only while this network interface is up (repeatable: any of them).", valueName: "name")) var interfaces: [String] = []
        @Flag(help: "Start a run only when the peer answers a TCP connect.") var whenReachable = false
        @Option(name: .customLong("download-rule"), help: ArgumentHelp("An attachment download rule for pulls, e.g. contentType=text/*,priority=10 or minLength=1MiB,skip (repeatable, first match wins).", valueName: "rule")) var downloadRules: [String] = []
        @Flag(help: "Stop and delete every other replication of DATABASE with another peer, in the same step.") var exclusively = false

        func validate() throws {
            if push && pull { throw ValidationError("--push and --pull exclude each other (the default does both)") }
            if (peerUser == nil) != (peerPassword == nil) { throw ValidationError("--peer-user and --peer-password go together") }
            if budget != nil && every == nil { throw ValidationError("--budget needs --every") }
            if backgroundEvery != nil && every == nil { throw ValidationError("--background-every needs --every") }
            if every != nil && continuous { throw ValidationError("--every and --continuous exclude each other") }
            if let id, !ReplicationSpec.isValidID(id) { throw ValidationError("--id \(id): not empty, no '/', not starting with '_'") }
        }

        /// The replication this command describes, checked as the daemon checks a document
        /// (`ReplicationSpec.validated`), so a mistake is said here rather than by the daemon.
        func spec(id: String) throws -> ReplicationSpec {
            var s = ReplicationSpec(id: id, database: database, peer: peer, direction: push ? .push : pull ? .pull : .both)
            s.continuous = continuous
            if let peerProtocol {
                guard let p = ReplicatorConfiguration.PeerProtocol(rawValue: peerProtocol) else {
                    throw ValidationError("--protocol \(peerProtocol): automatic, couchdb or blip")
                }
                s.peerProtocol = p
            }
            guard let policy = ReplicationSpec.ConflictPolicy(rawValue: conflicts) else {
                throw ValidationError("--conflicts \(conflicts): default, local or remote")
            }
            s.conflicts = policy
            if !docIDs.isEmpty { s.documentIDs = docIDs }
            s.filter = filter
            if let selector {
                guard let v = try? JSONParser.parse(Array(selector.utf8)), v.objectValue != nil, (try? MangoSelector(json: v)) != nil else {
                    throw ValidationError("--selector must be a Mango selector (a JSON object)")
                }
                s.selector = v
            }
            for p in params {
                guard let eq = p.firstIndex(of: "=") else { throw ValidationError("--param \(p): expected key=value") }
                s.queryParameters[String(p[..<eq])] = String(p[p.index(after: eq)...])
            }
            (s.user, s.password) = (peerUser, peerPassword)
            s.pins = pin
            s.batchSize = batchSize
            if let every {
                s.schedule = ReplicationSpec.Schedule(every: try Self.seconds(every, "--every"),
                                                      backgroundEvery: try backgroundEvery.map { try Self.seconds($0, "--background-every") },
                                                      budget: try budget.map { try Self.seconds($0, "--budget") } ?? 0)
            }
            s.conditions = ReplicationSpec.Conditions(interfaces: interfaces, reachable: whenReachable)
            s.download = try downloadRules.map(DownloadRuleJSON.parse)
            do { return try s.validated() } catch { throw ValidationError(error.reason) }
        }

        /// A duration option's seconds (`30s`, `15m`, `1h`, or a number).
        static func seconds(_ text: String, _ option: String) throws -> Double {
            guard let d = ReplicationSpec.parseDuration(text) else { throw ValidationError("\(option) \(text): not a duration such as 30s, 15m, 1h") }
            return d
        }

        func run() async throws {
            let id = self.id ?? ReplicationSpec.defaultID(database: database, peer: peer)
            let spec = try spec(id: id)
            if let client = try daemon.client() {
                _ = try await client.send("PUT", "/_replicator/\(PercentEncoding.encode(id))\(exclusively ? "?exclusively=true" : "")",
                                          json: .object(spec.storedJSON))
                print("ferry: replication \(id) added to the daemon at \(client.url)\(exclusively ? " (exclusively)" : "")")
            } else {
                try OfflineReplications(daemon).update { entries in
                    guard entries[id] == nil else { throw CommandFailure("replication \(id) exists (remove it first, or give --id)") }
                    if exclusively {
                        for (k, e) in entries where e.spec.database == spec.database && e.spec.peer != spec.peer { entries[k] = nil }
                    }
                    var journal = ReplicationJournal()
                    journal.record("added")
                    entries[id] = ReplicationStore.Entry(revision: ReplicationStore.nextRevision(after: nil), spec: spec, journal: journal)
                }
                print("ferry: replication \(id) added; it starts when the daemon starts")
            }
        }
    }

    /// `ferry replication ls`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the replications with their state.")
        @OptionGroup var daemon: DaemonOptions
        @Flag(help: "Print the jobs as JSON (the daemon's _scheduler/jobs shape).") var json = false

        func run() async throws {
            let jobs = try await Jobs.all(daemon)
            if json {
                print(String(decoding: CanonicalJSON.encode(.array(jobs.map(\.json))), as: UTF8.self))
                return
            }
            if jobs.isEmpty { print("no replications"); return }
            for j in jobs {
                let peer = j.direction == "pull" ? j.source : j.target
                print([j.id, j.state, j.database, j.direction, peer, "pushed \(j.info.docsPushed)", "pulled \(j.info.docsPulled)",
                       "failures \(j.info.docWriteFailures)"].joined(separator: "\t"))
            }
        }
    }

    /// `ferry replication show ID`.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one replication: its document, state, counters, history and failed documents (JSON).")
        @Argument(help: "The replication's ID.") var id: String
        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            guard let job = try await Jobs.all(daemon).first(where: { $0.id == id }) else {
                throw CommandFailure("no replication \(id)")
            }
            print(String(decoding: CanonicalJSON.encode(job.json), as: UTF8.self))
        }
    }

    /// `ferry replication pause ID`.
    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause a replication (it stays paused across restarts).")
        @Argument(help: "The replication's ID.") var id: String
        @OptionGroup var daemon: DaemonOptions
        func run() async throws { try await Jobs.setPaused(daemon, id, true) }
    }

    /// `ferry replication resume ID`.
    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused replication from its checkpoint.")
        @Argument(help: "The replication's ID.") var id: String
        @OptionGroup var daemon: DaemonOptions
        func run() async throws { try await Jobs.setPaused(daemon, id, false) }
    }

    /// `ferry replication rm ID`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Stop and delete a replication.")
        @Argument(help: "The replication's ID.") var id: String
        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            if let client = try daemon.client() {
                let doc = try await client.get("/_replicator/\(PercentEncoding.encode(id))")
                let rev = doc.objectValue?["_rev"]?.stringValue ?? ""
                _ = try await client.send("DELETE", "/_replicator/\(PercentEncoding.encode(id))?rev=\(PercentEncoding.encode(rev))", json: nil)
            } else {
                try OfflineReplications(daemon).update { entries in
                    guard entries.removeValue(forKey: id) != nil else { throw CommandFailure("no replication \(id)") }
                }
            }
            print("ferry: replication \(id) removed")
        }
    }
}

/// Reading and changing replications through the daemon or its file.
enum Jobs {
    /// Every job, from the daemon's `_scheduler/jobs` or, with none running, its file.
    static func all(_ daemon: DaemonOptions) async throws -> [SchedulerJob] {
        if let client = try daemon.client() {
            return SchedulerJob.list(from: try await client.get("/_scheduler/jobs"))
        }
        return try OfflineReplications(daemon).entries().map(\.job)
    }

    static func setPaused(_ daemon: DaemonOptions, _ id: String, _ paused: Bool) async throws {
        if let client = try daemon.client() {
            _ = try await client.send("POST", "/_replicator/\(PercentEncoding.encode(id))/\(paused ? "_pause" : "_resume")", json: nil)
        } else {
            try OfflineReplications(daemon).update { entries in
                guard var e = entries[id] else { throw CommandFailure("no replication \(id)") }
                e.journal.paused = paused
                e.journal.record(paused ? "paused" : "resumed", state: paused ? .paused : .initializing)
                entries[id] = e
            }
        }
        print("ferry: replication \(id) \(paused ? "paused" : "resumed")")
    }
}

/// A `--download-rule` argument as the JSON a replication document keeps.
enum DownloadRuleJSON {
    static func parse(_ argument: String) throws -> JSONValue {
        let rule: AttachmentDownloadRule
        do { rule = try AttachmentDownloadRule(argument: argument) } catch { throw ValidationError("--download-rule \(argument): \(error)") }
        let bytes = try JSONEncoder().encode(rule)
        return try JSONParser.parse(Array(bytes), sizeLimit: bytes.count + 1)
    }
}
