import FerryBLIP
import FerryStore

/// A pushing client that speaks the replication protocol without Ferry's own habits, as
/// simpler implementations do: one revision per `proposeChanges` message, each `rev` its own
/// uncompressed message sent on its own (no batch sends, no revision history tricks), at most
/// `window` documents in flight, no checkpoints. It measures what such a client costs the
/// server beside Ferry's own client.
enum SimplePusher {
    /// Pushes every document of `database` to the listener at `url`; returns how many the
    /// server stored.
    static func push(_ database: Database, to url: String, window: Int) async throws -> Int {
        let connection = try await BLIPConnection.connect(to: url + "/_blipsync", app: "CBMobile_3")
        var since: Int64 = 0
        let stored = try await withThrowingTaskGroup(of: Bool.self) { group in
            var (inFlight, stored) = (0, 0)
            while true {
                let page = try database.changes(since: since, limit: 1000)
                guard let last = page.last else { break }
                since = last.sequence
                for change in page {
                    if inFlight >= max(1, window), let done = try await group.next() {
                        inFlight -= 1
                        if done { stored += 1 }
                    }
                    inFlight += 1
                    group.addTask { try await pushOne(change, from: database, on: connection) }
                }
            }
            for try await done in group where done { stored += 1 }
            return stored
        }
        // The empty proposal says "caught up", as every client does.
        connection.send(.request(profile: "proposeChanges", body: Array("[]".utf8), noReply: true)) { _ in }
        await connection.close()
        return stored
    }

    /// Proposes one revision and, if the server wants it, sends it; true if it was stored.
    private static func pushOne(_ change: Change, from database: Database, on connection: BLIPConnection) async throws -> Bool {
        let id = change.documentID, rev = change.revisionID.description
        let proposal = CanonicalJSON.encode(.array([.array([.string(id), .string(rev)])]))
        let answer = try await connection.send(.request(profile: "proposeChanges", body: proposal))
        // An empty array (or a 0 for this entry) means "send it".
        guard answer.body == Array("[]".utf8) || answer.body == Array("[0]".utf8) else { return false }
        guard let doc = try database.documentJSON(id) else { return false }
        var properties: BLIPProperties = [("id", id), ("rev", rev)]
        if doc.isDeleted { properties["deleted"] = "1" }
        _ = try await connection.send(.request(profile: "rev", properties: properties, body: doc.body, compressed: false))
        return true
    }
}
