import FerryTestSupport
import Foundation
import Testing

/// `ferry status` in a real terminal (tmux): what the screen shows, read
/// with `capture-pane` while they run. Every wait polls the screen up to a deadline; none
/// sleeps for a fixed time.
@Suite("ferry status in a terminal (tmux)",
       .enabled(if: TmuxSession.available, "needs tmux (apt-get install tmux)"),
       .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "needs curl (apt-get install curl)"))
struct StatusTerminalTests {
    /// The shell-quoted path of the built `ferry`.
    static let ferry = "'\(ServeProcess.executable.path)'"

    /// The replication table's cells in the row that mentions `peer`, by column header; nil
    /// until both are on screen. Cells hold no spaces, so splitting on blanks finds them.
    static func replicationRow(_ screen: [String], peer: String) -> [String: String]? {
        guard let header = screen.first(where: { $0.hasPrefix("ID ") && $0.contains("STATE") }),
              let row = screen.first(where: { $0.contains(peer) }) else { return nil }
        let names = header.split(separator: " ").map(String.init)
        let cells = row.split(separator: " ").map(String.init)
        guard names.count == cells.count else { return nil }
        return Dictionary(uniqueKeysWithValues: zip(names, cells))
    }

    /// A count cell as a number (`1,234` → 1234; `–` → 0).
    static func number(_ cell: String?) -> Int { Int((cell ?? "").replacingOccurrences(of: ",", with: "")) ?? 0 }

    @Test func theLiveViewFollowsAReplicationAdaptsToResizeAndQuitsCleanly() async throws {
        try await StatusFixture.with { f in
            let tmux = try TmuxSession("\(Self.ferry) status --data '\(f.data)' --interval 0.2; echo status-exit-$?; read x", columns: 160, rows: 40, in: f.dir)
            defer { tmux.kill() }

            // The first screen: header, the database, the job with every column.
            let first = try await tmux.waitForScreen("the replication's row") { Self.replicationRow($0, peer: f.peerURL) != nil }
            #expect(first[0].hasPrefix("ferry status  \(f.daemon.baseURL)") && first[0].hasSuffix("q quits"))
            #expect(first.contains("REPLICATIONS (1)") && first.contains { $0.hasPrefix("notes ") })
            let before = try #require(Self.replicationRow(first, peer: f.peerURL))
            #expect(before["DIR"] == "both" && before["DB"] == "notes")
            #expect(["running", "initializing", "pending"].contains(before["STATE"] ?? ""), "\(before)")
            let movedBefore = max(Self.number(before["READ"]), Self.number(before["WRITTEN"]))

            // Documents written on the daemon are pushed to the peer: the same row's counts grow
            // on a later refresh, with the database's document count.
            try await f.write(40, prefix: "t")
            let after = try await tmux.waitForScreen("the row counting the 40 documents") { screen in
                guard let row = Self.replicationRow(screen, peer: f.peerURL) else { return false }
                return max(Self.number(row["READ"]), Self.number(row["WRITTEN"])) >= movedBefore + 40
                    && screen.contains { $0.hasPrefix("notes ") && $0.contains(" 40 ") }
            }
            let row = try #require(Self.replicationRow(after, peer: f.peerURL))
            #expect(row["STATE"] == "running", "\(row)")
            #expect(row != before)

            // A narrower window: redrawn at its width, not wrapped (the header's hint ends the first row).
            try tmux.resize(columns: 90, rows: 30)
            try await tmux.waitForScreen("the view redrawn 90 columns wide") { screen in
                screen[0].count == 90 && screen[0].hasSuffix("q quits") && screen.contains { $0.contains("running") }
            }

            // q quits with status 0 and gives back the main screen, where the shell's echo lands.
            try tmux.send("q")
            let end = try await tmux.waitForScreen("the command ending") { $0.contains { $0.hasPrefix("status-exit-") } }
            #expect(end.contains("status-exit-0"))
            #expect(!end.contains { $0.contains("REPLICATIONS") })
        }
    }

    @Test func ctrlCQuitsTooAndRestoresTheScreen() async throws {
        try await StatusFixture.with { f in
            let tmux = try TmuxSession("\(Self.ferry) status --data '\(f.data)'; echo status-exit-$?; read x", columns: 120, rows: 30, in: f.dir)
            defer { tmux.kill() }
            try await tmux.waitForScreen("the view") { $0.contains("REPLICATIONS (1)") }
            try tmux.send("C-c")
            let end = try await tmux.waitForScreen("the command ending") { $0.contains { $0.hasPrefix("status-exit-") } }
            #expect(end.contains("status-exit-0"))
            #expect(!end.contains { $0.contains("REPLICATIONS") })
        }
    }
}
