import FerryHTTP
import FerryServer
import FerryStore
import FoundationEssentials

/// Where `ferry status` gets its snapshots. A protocol so the view's loop can be driven by
/// something other than a live daemon.
protocol StatusSource: Sendable {
    /// Where the daemon is, for the header and messages.
    var location: String { get }
    /// The daemon's state now.
    func snapshot() async throws -> StatusSnapshot
}

/// A running daemon's REST API: `GET /`, `/_all_dbs`, `/{db}` for each, `/_scheduler/jobs`.
struct DaemonStatusSource: StatusSource {
    /// The daemon.
    let client: DaemonClient

    var location: String { client.url }

    func snapshot() async throws -> StatusSnapshot {
        let root = try await client.get("/").objectValue ?? [:]
        let names = try await client.get("/_all_dbs").arrayValue?.compactMap(\.stringValue) ?? []
        var databases: [StatusSnapshot.Database] = []
        for name in names {
            // A database deleted between the two requests is left out rather than failing the refresh.
            guard let info = try? await client.get("/" + Self.pathSegment(name)) else { continue }
            databases.append(StatusSnapshot.Database(info, name: name))
        }
        let jobs = SchedulerJob.list(from: try await client.get("/_scheduler/jobs"))
        return StatusSnapshot(server: .init(location: location, version: root["version"]?.stringValue,
                                            uptime: root["uptime"]?.doubleValue),
                              databases: databases.sorted { $0.name < $1.name }, jobs: jobs, takenAt: RateMeter.now)
    }

    /// A database name as one path segment: a nested name's `/` must travel as `%2F`.
    static func pathSegment(_ name: String) -> String {
        return PercentEncoding.encode(name, keeping: "$()+")
    }
}
