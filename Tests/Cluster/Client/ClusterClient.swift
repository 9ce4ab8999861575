import ArgumentParser
import FerryStore
import FerrySync
import Foundation

/// The cluster harness's library client: Ferry embedded as a library, the way an app uses it.
/// It keeps its own database, replicates it continuously with one peer, and takes writes as
/// JSON commands on standard input, one a line, answering each with one JSON line:
///
/// - `{"op":"put","id":ID,"body":{…}}` → `{"ok":true,"rev":REV}` (saved over whatever is current)
/// - `{"op":"delete","id":ID}` → `{"ok":true,"rev":REV}`, or `{"ok":false,"error":…}`
/// - `{"op":"attach","id":ID,"name":NAME,"data":BASE64}` → adds the attachment to the current revision
/// - `{"op":"wait-synced","timeout":SECONDS}` → `{"ok":true}` once the replicator is idle with
///   nothing left to push, `{"ok":false,"error":"timeout"}` otherwise
///
/// An answer `ok` means the write is committed here: the harness counts it acknowledged. End of
/// input stops the replicator and exits.
@main
struct ClusterClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-cluster-client",
        abstract: "A library client for the cluster harness: writes from stdin, continuous replication with one peer.")

    @Option(help: "The client's own database file.") var db: String
    @Option(help: "The peer's database URL (ws://host:port/db).") var target: String
    @Option(help: "Seconds between pings to the peer.") var heartbeat: Double = 2
    @Option(help: "The longest wait between attempts to reach the peer.") var retryMaxWait: Double = 2

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        var options = DatabaseOptions()
        options.watchExternalWrites = true
        let database = try Database.open(at: db, options: options)
        var config = ReplicatorConfiguration(database: database, target: target)
        config.continuous = true
        config.heartbeat = heartbeat
        config.maxAttemptWaitTime = retryMaxWait
        let replicator = Replicator(configuration: config)
        replicator.start()
        while let line = readLine() {
            let answer: JSONValue
            do { answer = try await handle(line, database: database, replicator: replicator) } catch {
                answer = .object(["ok": .bool(false), "error": .string("\(error)")])
            }
            print(String(decoding: CanonicalJSON.encode(answer), as: UTF8.self))
            fflush(nil)
        }
        await replicator.stop()
        database.close()
    }

    private func handle(_ line: String, database: Database, replicator: Replicator) async throws -> JSONValue {
        let command = try JSONParser.parseObject(Array(line.utf8))
        let id = command["id"]?.stringValue ?? ""
        switch command["op"]?.stringValue {
        case "put":
            var doc = try database.document(id, includeDeleted: true) ?? Document(id: id)
            let kept = doc.isDeleted ? nil : doc.properties["_attachments"]
            doc.properties = command["body"]?.objectValue ?? [:]
            if let kept { doc.properties["_attachments"] = kept }
            return revision(try database.save(doc))
        case "delete":
            guard let doc = try database.document(id) else { return failure("no document \(id)") }
            return revision(try database.delete(doc))
        case "attach":
            guard var doc = try database.document(id) else { return failure("no document \(id)") }
            guard let name = command["name"]?.stringValue, let b64 = command["data"]?.stringValue,
                  let data = Data(base64Encoded: b64) else { return failure("attach needs name and base64 data") }
            doc.setAttachment(name, blob: try database.writeBlob(Array(data)))
            return revision(try database.save(doc))
        case "wait-synced":
            let limit = ContinuousClock.now + .seconds(command["timeout"]?.doubleValue ?? 30)
            while ContinuousClock.now < limit {
                if replicator.status.activity == .idle, try replicator.pendingDocumentIDs().isEmpty {
                    return .object(["ok": .bool(true)])
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return failure("timeout")
        default:
            return failure("unknown op")
        }
    }

    private func revision(_ doc: Document) -> JSONValue {
        .object(["ok": .bool(true), "rev": .string(doc.revisionID?.description ?? "")])
    }

    private func failure(_ why: String) -> JSONValue { .object(["ok": .bool(false), "error": .string(why)]) }
}
