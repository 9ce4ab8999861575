import ArgumentParser
import FerryStore
import FoundationEssentials
import Glibc

/// `ferry status`: a running daemon at a glance — its databases, its replications with their
/// state, progress and rate, and their recent errors. On a terminal a full-screen view that
/// refreshes every `--interval` seconds until `q`; in a pipe one plain snapshot; `--json` one
/// JSON snapshot for scripts.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a running daemon: databases, replications (state, progress, rate), recent errors.",
        discussion: """
            On a terminal the view refreshes until q or Ctrl-C; in a pipe it prints one snapshot. \
            Exits 3 when no daemon answers.
            """)

    /// The exit status when no daemon answers, so scripts can tell "not running" from a usage error.
    static let notRunning: Int32 = 3

    @OptionGroup var daemon: DaemonOptions
    @Flag(help: #"Print one JSON snapshot ({"databases":[…],"replications":[…]}) and exit."#) var json = false
    @Option(help: ArgumentHelp("Seconds between refreshes of the live view.", valueName: "seconds"))
    var interval: Double = 1

    func validate() throws {
        guard interval >= 0.1, interval.isFinite else { throw ValidationError("--interval must be at least 0.1 seconds") }
    }

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let source: DaemonStatusSource
        let first: StatusSnapshot
        do {
            guard let client = try daemon.client() else {
                warn("ferry: no daemon is running on \(daemon.data ?? daemon.db ?? "this data")")
                throw ExitCode(Self.notRunning)
            }
            source = DaemonStatusSource(client: client)
            first = try await source.snapshot()
        } catch DaemonClient.Failure.unreachable(let reason) {
            warn("ferry: no daemon answers: \(reason)")
            throw ExitCode(Self.notRunning)
        } catch let error as DaemonClient.Failure {
            // It runs but refuses (credentials, say): not "not running".
            warn("ferry: cannot read the daemon's status: \(error)")
            throw ExitCode(1)
        }
        if json {
            print(String(decoding: CanonicalJSON.encode(first.json), as: UTF8.self))
        } else if isatty(STDOUT_FILENO) != 0 {
            await live(source, first: first)
        } else {
            // A pipe or a file: one snapshot, as wide as it needs, without escape codes.
            let view = StatusView(width: 1000, height: nil, color: false)
            print(view.render(first, previous: nil).joined(separator: "\n"))
        }
    }

    /// What the live view's loop waits for.
    private enum Step: Sendable {
        case terminal(LiveTerminal.Event)
        case refreshed(Result<StatusSnapshot, any Error>)
    }

    /// The full-screen view: redrawn after every refresh and on resize, until the user quits.
    private func live(_ source: some StatusSource, first: StatusSnapshot) async {
        let terminal = LiveTerminal()
        defer { terminal.restore() }
        let (steps, continuation) = AsyncStream<Step>.makeStream()
        let forward = Task {
            for await event in terminal.events { continuation.yield(.terminal(event)) }
        }
        // Refreshes run beside the loop, so a slow daemon never keeps `q` from quitting.
        let interval = interval
        let refresh = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(interval))
                do { continuation.yield(.refreshed(.success(try await source.snapshot()))) } catch {
                    continuation.yield(.refreshed(.failure(error)))
                }
            }
        }
        defer { refresh.cancel(); forward.cancel() }

        var current = first
        var previous: StatusSnapshot?
        var notice: String?
        func draw() {
            let size = Terminal.size(of: STDOUT_FILENO) ?? Terminal.Size(columns: 80, rows: 24)
            let view = StatusView(width: size.columns, height: size.rows, color: true, hint: "q quits")
            terminal.draw(view.render(current, previous: previous, notice: notice))
        }
        draw()
        for await step in steps {
            switch step {
            case .terminal(.quit):
                return
            case .terminal(.resize):
                draw()
            case .refreshed(.success(let snapshot)):
                (previous, current, notice) = (current, snapshot, nil)
                draw()
            case .refreshed(.failure(let error)):
                // Keep the last snapshot on screen and say why it is getting old.
                notice = "cannot reach the daemon at \(source.location): \(error) (retrying)"
                draw()
            }
        }
    }
}
