import ArgumentParser
import FerryStore
import Foundation

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "A peer-to-peer JSON document replicator: serve a database, sync with peers, edit documents.",
        subcommands: [Serve.self, Sync.self, Put.self, Get.self, Delete.self, List.self],
        defaultSubcommand: Serve.self)
}

/// `--db PATH`, shared by every command.
struct DatabaseOption: ParsableArguments {
    @Option(name: .long, help: "The database file (created if missing).")
    var db = "ferry.db"

    func open(watchExternalWrites: Bool = false) throws -> Database {
        var options = DatabaseOptions()
        options.watchExternalWrites = watchExternalWrites
        do { return try Database.open(at: db, options: options) } catch {
            throw ValidationError("cannot open \(db): \(error)")
        }
    }
}

/// Suspends until SIGINT or SIGTERM.
func waitForTermination() async {
    let (signals, continuation) = AsyncStream<Void>.makeStream()
    // The sources live as long as this function, which is as long as they are needed.
    let sources = [SIGINT, SIGTERM].map { sig in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler { continuation.finish() }
        source.resume()
        return source
    }
    for await _ in signals {}
    sources.forEach { $0.cancel() }
}

/// Writes a line to standard error.
func warn(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}
