import FerryTestSupport
import Foundation
import Testing

/// `ferry sync`'s progress bar where it belongs and nowhere else: drawn on a terminal (tmux,
/// everything the program wrote recorded with `pipe-pane`), absent from a pipe.
@Suite("ferry sync in a terminal (tmux) and in a pipe",
       .enabled(if: TmuxSession.available, "needs tmux (apt-get install tmux)"),
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs curl (apt-get install curl)"))
struct SyncTerminalTests {
    /// The shell-quoted path of the built `ferry`.
    static let ferry = "'\(ServeProcess.executable.path)'"

    @Test func syncDrawsABarOnATerminalAndNothingButTheSummaryInAPipe() async throws {
        let dir = TempDir()
        let peer = try await ServeProcess(["--db", dir.path("peer.db"), "--name", "notes", "--allow-anonymous"])
        // Stopped on every path: a failed expectation must not leave the peer running.
        do {
            // Enough documents for the pull to take several of the bar's tenths of a second.
            let docs = (0..<5000).map { #"{"_id":"d\#($0)","text":"document number \#($0)"}"# }.joined(separator: ",")
            try #"{"docs":[\#(docs)]}"#.write(toFile: dir.path("docs.json"), atomically: true, encoding: .utf8)
            let put = try await curl(["-X", "POST", "-H", "Content-Type: application/json", "\(peer.baseURL)/notes/_bulk_docs",
                                      "--data-binary", "@\(dir.path("docs.json"))"])
            #expect(put.status == 201)

            // On a terminal: the bar, with its label, glyphs and counts, is drawn and then cleared.
            let log = dir.path("terminal.log")
            let tmux = try TmuxSession("sh", columns: 120, rows: 30, in: dir)
            defer { tmux.kill() }
            try tmux.record(to: log)
            try tmux.send("\(Self.ferry) sync \(peer.wsURL)/notes --db '\(dir.path("tty.db"))' --pull; echo sync-exit-$?", "Enter")
            let screen = try await tmux.waitForScreen(timeout: 120, "the sync ending") { $0.contains { $0.contains("sync-exit-0") } }
            #expect(screen.contains { $0.contains("ferry: 0 pushed, 5000 pulled, 0 conflicts resolved, 0 errors") })
            #expect(!screen.contains { $0.contains("━") || $0.contains("docs/s") }, "the bar was left on screen")
            let written = try await waitForFile(log) { $0.contains("sync-exit-0") }
            // The total grows as the peer's changes arrive, so which counts were drawn varies.
            #expect(written.contains("pulling ") && written.contains("━"), "\(written.suffix(2000))")
            #expect(written.contains(/pulling \S+  [0-9,]+\/[0-9,]+/), "\(written.suffix(2000))")

            // In a pipe: the same summary, no bar, no escape codes.
            let piped = try await runFerry(["sync", "\(peer.wsURL)/notes", "--db", dir.path("pipe.db"), "--pull"])
            #expect(piped.status == 0)
            #expect(piped.out == "ferry: 0 pushed, 5000 pulled, 0 conflicts resolved, 0 errors\n")
            #expect(!piped.err.contains("\u{1B}") && !piped.err.contains("━"), "\(piped.err.debugDescription)")
        } catch {
            await peer.stop()
            throw error
        }
        await peer.stop()
    }

    /// The file's text once `predicate` holds (pipe-pane writes it a little after the screen shows it).
    func waitForFile(_ path: String, _ predicate: (String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(10)
        var text = ""
        while Date() < deadline {
            text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if predicate(text) { return text }
            try await Task.sleep(for: .milliseconds(50))
        }
        return text
    }
}
