import FerryServer
import FerryStore

/// What `ferry status` shows at one moment: the daemon, its databases and its replication
/// jobs, read from the REST API (`GET /`, `/_all_dbs`, `/{db}`, `/_scheduler/jobs`). Every
/// field is read leniently — a missing or oddly typed member becomes a default — because the
/// view should show what a daemon (perhaps an older or newer one) does say rather than nothing.
struct StatusSnapshot: Sendable {
    /// The daemon itself.
    struct Server: Sendable, Equatable {
        /// Where it was reached, for the header (`http://127.0.0.1:4984`).
        var location: String
        /// `GET /`'s `version`.
        var version: String?
        /// Seconds since it started, if it says.
        var uptime: Double?
    }

    /// One database as `GET /{db}` describes it.
    struct Database: Sendable, Equatable {
        /// The name.
        var name: String
        /// Live documents.
        var documents: Int64
        /// Deleted documents (tombstones).
        var deleted: Int64
        /// The last change sequence (an opaque string in CouchDB's API).
        var updateSeq: String
        /// The file's size in bytes, if given.
        var fileBytes: Int64?
        /// The object as the daemon sent it, for `--json`.
        var json: JSONValue

        /// Reads `GET /{db}`'s answer; `name` is used when it has no `db_name`.
        init(_ json: JSONValue, name: String) {
            let o = json.objectValue ?? [:]
            self.name = o["db_name"]?.stringValue ?? name
            documents = o["doc_count"]?.intValue ?? 0
            deleted = o["doc_del_count"]?.intValue ?? 0
            updateSeq = o["update_seq"].map(Self.sequenceText) ?? ""
            fileBytes = o["sizes"]?.objectValue?["file"]?.intValue
            self.json = json
        }

        /// A sequence as text: Ferry sends strings, older CouchDB numbers.
        static func sequenceText(_ v: JSONValue) -> String {
            v.stringValue ?? v.intValue.map(String.init) ?? ""
        }
    }

    /// The daemon.
    var server: Server
    /// Its databases, sorted by name.
    var databases: [Database]
    /// Its replication jobs, in the daemon's order.
    var jobs: [SchedulerJob]
    /// When it was taken, in seconds on a monotonic clock: rates divide by the difference.
    var takenAt: Double

    /// `--json`: `{"databases":[…],"replications":[…]}` with the daemon's own objects.
    var json: JSONValue {
        .object(["databases": .array(databases.map(\.json)), "replications": .array(jobs.map(\.json))])
    }
}
