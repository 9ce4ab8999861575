import ArgumentParser
import FerryNet
import FerryWebSocket
import Foundation
import Logging

@main
struct FerryEcho: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-echo",
        abstract: "WebSocket echo server and Autobahn client, for tests, benchmarks and conformance checks.",
        subcommands: [Serve.self, AutobahnClient.self],
        defaultSubcommand: Serve.self)
}
