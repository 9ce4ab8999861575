import ArgumentParser
import FerryServer
import FerryStore

/// `ferry policy mode active|background`: which period a daemon's periodic replications use.
struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy", abstract: "Switch a daemon's periodic replications between their active and background periods.",
        subcommands: [Mode.self])

    /// `ferry policy mode [active|background]`.
    struct Mode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show or set the mode (also: SIGUSR1 = active, SIGUSR2 = background to the daemon).",
            discussion: "Example: ferry policy mode background --data ~/ferry")
        @Argument(help: "active or background (omit to show the mode).") var mode: String?
        @OptionGroup var daemon: DaemonOptions

        func validate() throws {
            if let mode, ReplicationScheduler.Mode(rawValue: mode) == nil { throw ValidationError("the mode is active or background") }
        }

        func run() async throws {
            guard let client = try daemon.client() else { throw CommandFailure("no daemon serves that data (start one with ferry serve)") }
            let answer: JSONValue
            if let mode {
                answer = try await client.send("PUT", "/_scheduler/mode", json: .object(["mode": .string(mode)]))
            } else {
                answer = try await client.get("/_scheduler/mode")
            }
            print(answer.objectValue?["mode"]?.stringValue ?? "?")
        }
    }
}
