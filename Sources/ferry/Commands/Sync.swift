import ArgumentParser
import FerryNet
import FerryStore
import FerrySync
import FoundationEssentials
import Glibc
import Synchronization

/// `ferry sync`: one replication with a peer, with a live progress line and a summary.
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push to and pull from a peer (http://host:port/db for CouchDB, ws://host:port/db for BLIP); one-shot unless --continuous.",
        discussion: """
        A one-shot sync retries an unreachable peer (waits doubling from 1 s)
        until --timeout seconds have passed or --max-attempts attempts have
        failed, then gives up with one line saying why. Documents the peer
        rejects (its validation) or whose attachments cannot be fetched are
        named on standard error, and the sync exits 1.

        Exit status:
          0  done: everything was pushed and pulled
          1  failed: the replication, or some documents (named on stderr)
          2  usage: a wrong option or value
          3  unreachable: gave up within --timeout / --max-attempts
          4  authentication refused by the peer (HTTP 401 or 403)
          5  TLS refused: the peer's certificate (--pin, --ca) or ours

        Example:
          ferry sync ws://127.0.0.1:4984/naomi --db molly.db
          ferry sync http://admin:pw@127.0.0.1:5984/tasks --db tasks.db
          ferry sync https://couch:6984/tasks --pull --selector '{"type":"task"}'
          ferry sync http://sg:4984/tasks --protocol blip
          ferry sync ws://rita:secret@host:4984/tasks --pull --timeout 10
          ferry sync wss://host:4984/tasks --pin "$PIN" --max-attempts 3
          ferry sync ws://host:4984/tasks --pull --filter byOwner \\
              --param owner=molly
          ferry sync ws://host:4984/tasks --doc-id task-1 --doc-id task-2
          ferry sync ws://host:4984/tasks --batch-size 100 --continuous
        """)

    @Argument(help: "The peer's database URL: http(s)://host:port/db for CouchDB (its replication protocol), ws(s)://host:port/db for Couchbase Lite, Sync Gateway and Ferry peers (BLIP).") var url: String
    @Option(name: .customLong("protocol"), help: ArgumentHelp("Which protocol to speak: automatic (by the URL's scheme), couchdb, or blip (e.g. a Sync Gateway given as http://).",
                                                               valueName: "name"))
    var peerProtocol: String = "automatic"
    @OptionGroup var database: DatabaseOption
    @Flag(help: "Only push local changes.") var push = false
    @Flag(help: "Only pull the peer's changes.") var pull = false
    @Flag(help: "Keep running, propagating changes as they happen (Ctrl-C stops).") var continuous = false
    @Option(help: "HTTP Basic user name for the peer.") var user: String?
    @Option(help: "The password for --user.") var password: String?
    @Flag(help: "Forget the checkpoint and compare everything again.") var resetCheckpoint = false
    @Option(help: ArgumentHelp("Connection attempts before giving up (0 = no limit; default 10, continuous: no limit).",
                               valueName: "n"))
    var maxAttempts: Int?
    @Option(help: ArgumentHelp("Give up rather than retry past this many seconds of the peer being unreachable (0 = never; default 60, continuous: never).",
                               valueName: "seconds"))
    var timeout: Double?
    @Option(help: ArgumentHelp("The longest wait between attempts to reach the peer (the wait doubles from 1 s up to this).",
                               valueName: "seconds"))
    var retryMaxWait: Double = 300
    @Option(help: ArgumentHelp("Documents per changes message (and per checkpoint step).", valueName: "n"))
    var batchSize: Int = ReplicatorConfiguration.defaultBatchSize
    @Option(help: ArgumentHelp("Pull only what the peer's pull filter of this name lets through (registered on the serving peer; CouchDB's `filter`).",
                               valueName: "name"))
    var filter: String?
    @Option(name: .customLong("param"), help: ArgumentHelp("A parameter for --filter (CouchDB's `query_params`); repeatable.", valueName: "key=value"))
    var parameters: [String] = []
    @Option(help: ArgumentHelp("Replicate only documents matching this Mango selector (a JSON object): the peer filters what is pulled (CouchDB and Ferry peers), the push sends only local matches.", valueName: "json"))
    var selector: String?
    @Option(name: .customLong("doc-id"), help: ArgumentHelp("Replicate only this document, both ways; repeatable.", valueName: "id"))
    var documentIDs: [String] = []
    @OptionGroup(title: "TLS (wss:// peers)") var tls: ClientTLSOptions
    @OptionGroup(title: "Attachments (pull)") var downloads: DownloadRuleOptions

    func validate() throws {
        if push && pull { throw ValidationError("--push and --pull exclude each other (the default does both)") }
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
        if let maxAttempts, maxAttempts < 0 { throw ValidationError("--max-attempts must be 0 (no limit) or positive") }
        if let timeout, timeout < 0 { throw ValidationError("--timeout must be 0 (never) or positive") }
        if retryMaxWait <= 0 { throw ValidationError("--retry-max-wait must be positive") }
        if batchSize < 1 { throw ValidationError("--batch-size must be positive") }
        if filter != nil && push { throw ValidationError("--filter selects what is pulled; it does nothing with --push") }
        if filter == nil && !parameters.isEmpty { throw ValidationError("--param goes with --filter") }
        _ = try filterParameters()
        if documentIDs.contains(where: \.isEmpty) { throw ValidationError("--doc-id needs a document ID") }
        guard ReplicatorConfiguration.PeerProtocol(rawValue: peerProtocol) != nil else {
            throw ValidationError("--protocol must be automatic, couchdb or blip")
        }
        if selector != nil {
            guard let json = try? parsedSelector(), (try? MangoSelector(json: json)) != nil else {
                throw ValidationError("--selector must be a Mango selector (a JSON object)")
            }
            if filter != nil { throw ValidationError("--selector and --filter both select what is pulled: give one") }
        }
    }

    /// `--selector` as JSON.
    func parsedSelector() throws -> JSONValue? {
        guard let selector else { return nil }
        let value = try JSONParser.parse(Array(selector.utf8))
        guard value.objectValue != nil else { throw ValidationError("--selector must be a JSON object") }
        return value
    }

    /// The `--param K=V` pairs as the filter's parameters.
    func filterParameters() throws -> [String: String] {
        var out: [String: String] = [:]
        for p in parameters {
            guard let eq = p.firstIndex(of: "="), eq != p.startIndex else {
                throw ValidationError("--param \(p) is not KEY=VALUE")
            }
            let key = String(p[..<eq])
            if out[key] != nil { throw ValidationError("--param \(key) is given twice") }
            out[key] = String(p[p.index(after: eq)...])
        }
        return out
    }

    /// The URL with any password replaced by `***`, for messages.
    static func redacted(_ url: String) -> String {
        guard var c = URLComponents(string: url), c.password != nil else { return url }
        c.password = "***"
        return c.string ?? url
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let db = try database.open(watchExternalWrites: continuous)
        var c = ReplicatorConfiguration(database: db, target: url)
        c.type = push ? .push : pull ? .pull : .pushAndPull
        c.continuous = continuous
        c.resetCheckpoint = resetCheckpoint
        // One-shot: a minute of an unreachable peer is enough (the backoff alone would retry for ~8).
        c.maxAttempts = maxAttempts.map { $0 == 0 ? .max : $0 } ?? 0
        c.maxOfflineTime = timeout ?? (continuous ? 0 : 60)
        c.maxAttemptWaitTime = retryMaxWait
        c.tls = tls.configuration
        c.attachmentDownloadPolicy = downloads.policy
        c.batchSize = batchSize
        c.pullFilter = filter
        c.pullFilterParameters = try filterParameters()
        if !documentIDs.isEmpty { c.documentIDs = documentIDs }
        c.peerProtocol = ReplicatorConfiguration.PeerProtocol(rawValue: peerProtocol) ?? .automatic
        c.selector = try parsedSelector()
        // Credentials in the URL are the Replicator's to use; --user/--password win over them.
        if let user, let password { c.authenticator = .basic(user: user, password: password) }
        let replicator = Replicator(configuration: c)

        let terminal = isatty(STDERR_FILENO) != 0
        let bar = ProgressBar.wanted() ? ProgressBar() : nil
        // Counted as each event happens, on the replicator's thread: a stream's consumer task
        // woke for every document, ~9 % of a push's CPU in this process.
        let tally = Mutex(Tally())
        replicator.addDocumentListener { e in
            let line: String? = tally.withLock { t in
                switch e.kind {
                case .pushed: t.counts["pushed", default: 0] += 1
                case .pulled: t.counts["pulled", default: 0] += 1
                case .conflictResolved: t.counts["conflicts resolved", default: 0] += 1
                case .failed(let error):
                    t.counts["errors", default: 0] += 1
                    if !t.failed.contains(e.documentID) { t.failed.append(e.documentID) }
                    return "ferry: \(e.documentID) failed: \(Self.describe(documentError: error))"
                }
                return nil
            }
            if let line { if let bar { bar.printAbove(line) } else { warn(line) } }
        }
        if let bar {
            let work = push ? "pushing" : pull ? "pulling" : "syncing"
            replicator.addStatusListener { s in
                bar.update(label: s.activity == .busy ? work : s.activity.rawValue, completed: s.progress.completed, total: s.progress.total)
            }
            bar.start()
        }
        replicator.start()
        // A continuous replication runs until Ctrl-C / SIGTERM; a one-shot one until done.
        let stop = continuous ? Task { await waitForTerminationSignal(); await replicator.stop() } : nil
        let error = await replicator.waitUntilStopped()
        stop?.cancel()
        await bar?.stop()
        let seen = tally.withLock { $0 }
        db.close()
        try finish(seen, error: error, terminal: terminal)
    }

    /// What the event stream saw: counts by kind and the documents that failed, in order.
    struct Tally: Sendable {
        var counts: [String: Int] = [:]
        var failed: [String] = []
    }

    private func finish(_ tally: Tally, error: ReplicationError?, terminal: Bool) throws {
        if terminal { Terminal.write("\r\u{1B}[K", to: STDERR_FILENO) }
        let keys = ["pushed", "pulled", "conflicts resolved", "errors"]
        print("ferry: " + keys.map { "\(tally.counts[$0] ?? 0) \($0)" }.joined(separator: ", "))
        if let error {
            let credentials = user != nil || URLComponents(string: url)?.user != nil
            let (status, reason) = Self.outcome(of: error, url: Self.redacted(url), credentials: credentials,
                                                timeout: timeout ?? (continuous ? 0 : 60),
                                                maxAttempts: maxAttempts ?? (continuous ? 0 : 10))
            warn("ferry: \(reason)")
            throw status.exitCode
        }
        if !tally.failed.isEmpty {
            let n = tally.failed.count
            warn("ferry: \(n) document\(n == 1 ? "" : "s") failed: \(tally.failed.joined(separator: ", "))")
            throw ExitStatus.failed.exitCode
        }
    }

    /// A document's failure in words: a peer's refusal says so.
    static func describe(documentError error: ReplicationError) -> String {
        if case let .remote(_, code, message) = error, code == 403 || code == 401 {
            return "rejected by the peer (\(code)): \(message)"
        }
        return "\(error)"
    }

    /// How a replication that stopped with `error` exits, and the one line that says why.
    /// `credentials`: whether any were given; `timeout` and `maxAttempts` (0 = no limit) are the
    /// limits in force, named in the message.
    static func outcome(of error: ReplicationError, url: String, credentials: Bool, timeout: Double,
                        maxAttempts: Int) -> (ExitStatus, String) {
        switch error {
        case .httpStatus(let s, let m) where s == 401 || s == 403,
             .remote("HTTP", let s, let m) where s == 401 || s == 403:
            let what = s == 403 ? "these credentials may not replicate this database"
                : credentials ? "the user name or password is wrong"
                : "the peer wants credentials: --user/--password, or scheme://user:password@host/db"
            return (.authenticationRefused, "authentication refused by \(url): HTTP \(s)\(m.isEmpty ? "" : " \(m)"): \(what)")
        case .tls(let e) where !error.isTransient:
            if case .configuration = e { return (.failed, "replication failed: \(e)") }
            let hint: String
            switch e {
            case .certificateRejected: hint = " (check --pin, or --ca for CA-issued certificates)"
            case .alertReceived: hint = " (does the peer want a client certificate? --client-cert/--client-key)"
            default: hint = ""
            }
            return (.tlsRefused, "TLS refused with \(url): \(e)\(hint)")
        case .store:
            return (.failed, "replication failed: \(error)")
        default:
            guard error.isTransient else { return (.failed, "replication failed: \(error)") }
            // The replicator stops on a transient error only when it has given up.
            var limits: [String] = []
            if timeout > 0 { limits.append("--timeout \(Self.seconds(timeout))") }
            limits.append("--max-attempts \(maxAttempts == 0 ? "unlimited" : "\(maxAttempts)")")
            let why: String
            switch error {
            case let .gaveUp(attempts, seconds, reason): why = " \(ReplicationError.attempts(attempts, in: seconds)): \(reason)"
            case .connection(let s): why = ": " + s
            default: why = ": \(error)"
            }
            return (.unreachable, "gave up on \(url), unreachable\(why) (\(limits.joined(separator: ", ")))")
        }
    }

    private static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}
