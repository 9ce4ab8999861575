import FerryTestSupport
import Foundation

/// A real terminal for tests: a detached tmux session of a fixed size, on a tmux server of its
/// own (`-S`, a socket in the test's temporary directory, so the tests neither see nor disturb
/// anyone's tmux and leave no socket behind),
/// read with `capture-pane` as a user would see it.
final class TmuxSession: @unchecked Sendable {
    // @unchecked: every member is set once in init and only read afterwards.
    static let executable = "/usr/bin/tmux"
    /// Whether tmux is installed (the tests that need it are skipped, saying so, where it is not).
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    private let socket: String
    private let config: String

    /// Starts `command` (a shell command line) in a `columns`×`rows` window. The pane stays
    /// after its command exits. How a program ended is best told by the command line itself,
    /// `prog; echo exit-$?; read x`: tmux 3.3 sometimes leaves an exited program unreaped for
    /// seconds, its status unknown, and may drop what a program wrote just before exiting;
    /// the `read` keeps the shell, and so the pane, alive until the test is done with it.
    init(_ command: String, columns: Int = 160, rows: Int = 40, in dir: TempDir) throws {
        // Short: a socket path must fit in sun_path (108 bytes); the directory is the test's own.
        let name = "tmux-\(UUID().uuidString.prefix(8))"
        config = dir.path(name + ".conf")
        socket = dir.path(name + ".sock")
        try "set -g remain-on-exit on\nset -g status off\nset -g history-limit 0\n".write(toFile: config, atomically: true, encoding: .utf8)
        try startServer(["new-session", "-d", "-s", "main", "-x", "\(columns)", "-y", "\(rows)", command])
    }

    /// Runs the tmux client that starts the server with no signal blocked and every signal's
    /// default action. The server forked from it keeps that signal mask, and a test runner's
    /// threads (Foundation's `Process` spawns from them) block nearly every signal: a server
    /// started that way never hears SIGCHLD, so it neither notices its pane's program exit
    /// nor ever finishes `kill-server`.
    private func startServer(_ args: [String]) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let env = Self.environment
        let argv = [Self.executable, "-S", socket, "-f", config] + args
        var cArgs = argv.map { strdup($0) } + [nil]
        var cEnv = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (cArgs + cEnv).forEach { free($0) } }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, Self.executable, nil, &attributes, &cArgs, &cEnv)
        guard error == 0 else { throw CurlFailure(reason: "cannot start tmux: errno \(error)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { throw CurlFailure(reason: "tmux \(args.joined(separator: " ")) failed (wait status \(status))") }
    }

    /// The environment tmux runs in: a usable TERM, and no TMUX (tests run inside someone's
    /// tmux must not talk to it).
    private static var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["TERM"] = env["TERM"].flatMap { $0.isEmpty || $0 == "dumb" ? nil : $0 } ?? "xterm-256color"
        env.removeValue(forKey: "TMUX")
        return env
    }

    /// What the pane shows now, one string per row, trailing spaces removed by tmux.
    func screen() throws -> [String] {
        try tmux(["capture-pane", "-p", "-t", "main"]).components(separatedBy: "\n")
    }

    /// Polls the screen until `predicate` holds; the screen it held on. Throws with the last
    /// screen at the deadline: the screen itself is the best report of what went wrong.
    @discardableResult
    func waitForScreen(timeout: Double = 30, _ what: String, _ predicate: ([String]) -> Bool) async throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var last: [String] = []
        while Date() < deadline {
            last = try screen()
            if predicate(last) { return last }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw CurlFailure(reason: "the terminal never showed \(what); it shows:\n" + last.joined(separator: "\n"))
    }

    /// Types `keys` (tmux key names: `q`, `Enter`, `C-c`).
    func send(_ keys: String...) throws { try tmux(["send-keys", "-t", "main"] + keys) }

    /// Resizes the window.
    func resize(columns: Int, rows: Int) throws {
        try tmux(["resize-window", "-t", "main", "-x", "\(columns)", "-y", "\(rows)"])
    }

    /// Copies everything the pane's program writes, escape codes included, to `file`.
    func record(to file: String) throws { try tmux(["pipe-pane", "-o", "-t", "main", "cat >> '\(file)'"]) }

    /// Ends the session's tmux server (its own: nothing else runs on this socket).
    func kill() { _ = try? tmux(["kill-server"]) }

    deinit { kill() }

    @discardableResult
    private func tmux(_ args: [String]) throws -> String {
        let p = Process()
        let out = Pipe()
        p.executableURL = URL(fileURLWithPath: Self.executable)
        p.arguments = ["-S", socket, "-f", config] + args
        p.environment = Self.environment
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw CurlFailure(reason: "tmux \(args.joined(separator: " ")) exited \(p.terminationStatus)") }
        return String(decoding: data, as: UTF8.self)
    }
}
