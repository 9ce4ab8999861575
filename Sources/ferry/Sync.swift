import ArgumentParser
import FerryNet
import FerryStore
import FerrySync
import Foundation

/// `ferry sync`: one replication with a peer, with a live progress line and a summary.
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push to and pull from a peer (ws://host:port/db); one-shot unless --continuous.")

    @Argument(help: "The peer's database URL, ws://host:port/db or wss://host:port/db.") var url: String
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
    @OptionGroup(title: "TLS (wss:// peers)") var tls: ClientTLSOptions
    @OptionGroup(title: "Attachments (pull)") var downloads: DownloadRuleOptions

    func validate() throws {
        if push && pull { throw ValidationError("--push and --pull exclude each other (the default does both)") }
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
        if let maxAttempts, maxAttempts < 0 { throw ValidationError("--max-attempts must be 0 (no limit) or positive") }
        if let timeout, timeout < 0 { throw ValidationError("--timeout must be 0 (never) or positive") }
        if retryMaxWait <= 0 { throw ValidationError("--retry-max-wait must be positive") }
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
        // Credentials in the URL are the Replicator's to use; --user/--password win over them.
        if let user, let password { c.authenticator = .basic(user: user, password: password) }
        let replicator = Replicator(configuration: c)

        let terminal = isatty(STDERR_FILENO) != 0
        let bar = ProgressBar.wanted() ? ProgressBar() : nil
        let events = replicator.documentEvents()
        let tally = Task { () -> [String: Int] in
            var counts: [String: Int] = [:]
            for await e in events {
                switch e.kind {
                case .pushed: counts["pushed", default: 0] += 1
                case .pulled: counts["pulled", default: 0] += 1
                case .conflictResolved: counts["conflicts resolved", default: 0] += 1
                case .failed(let error):
                    counts["errors", default: 0] += 1
                    if let bar { bar.printAbove("ferry: \(e.documentID): \(error)") } else { warn("ferry: \(e.documentID): \(error)") }
                }
            }
            return counts
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
        try finish(await tally.value, error: error, terminal: terminal)
        db.close()
    }

    private func finish(_ counts: [String: Int], error: ReplicationError?, terminal: Bool) throws {
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        let keys = ["pushed", "pulled", "conflicts resolved", "errors"]
        print("ferry: " + keys.map { "\(counts[$0] ?? 0) \($0)" }.joined(separator: ", "))
        if let error {
            warn("ferry: replication failed: \(error)")
            throw ExitCode(1)
        }
    }
}
