import ArgumentParser

@main
struct FerryBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-bench",
        abstract: "Side-by-side measurements (docs/performance.md).",
        subcommands: [StoreBench.self, BLIPBench.self, CodecBench.self, SyncBench.self, RestBench.self, QueryBench.self, WebSocketClientBench.self, IdleConnectionsBench.self, ContentionBench.self])
}
