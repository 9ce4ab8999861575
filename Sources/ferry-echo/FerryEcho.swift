import ArgumentParser
import FerryNet
import FerryWebSocket
import Foundation
import Logging

@main
struct FerryEcho: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-echo",
        abstract: "WebSocket and BLIP echo servers and clients, for tests, benchmarks and conformance checks.",
        subcommands: [Serve.self, AutobahnClient.self, BLIPServe.self, BLIPClient.self],
        defaultSubcommand: Serve.self)
}
