import CoreMetrics
import FerryStore
import FerrySync
import FoundationEssentials
import Prometheus
import Synchronization

/// A daemon's metrics (docs/daemon.md, "Metrics"), kept with swift-metrics in a Prometheus
/// registry of its own and rendered in Prometheus' text format for `GET /_metrics`.
///
/// Each daemon has its own registry and factory, handed to every metric it makes, rather than
/// `MetricsSystem.bootstrap`: that may run once per process, and tests start several daemons
/// in one. Request counts are counted as requests finish; the rest (databases, replications,
/// connections, BLIP counters) is read at scrape time from what already keeps it, so the hot
/// paths pay nothing for it.
public final class DaemonMetrics: Sendable {
    /// The routes requests are counted by: a small fixed set, so the `route` label's values
    /// stay few whatever clients send.
    public enum Route: String, Sendable, CaseIterable {
        case document, all_docs, bulk_docs, changes, server, database, attachment, other
    }

    /// Where the scrape-time values come from.
    struct Sources: Sendable {
        var registry: DatabaseRegistry
        var replications: ReplicationRegistry
        var http: HTTPConnectionTracker
        var logins: FailureThrottle
        var listener: @Sendable () -> SyncListener?
    }

    /// The Prometheus registry the metrics live in.
    public let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory

    private struct ScrapeState {
        /// Counters mirrored from running totals kept elsewhere: the total last added, per
        /// name and label set, so each scrape adds only what is new.
        var mirrored: [String: Int] = [:]
        /// Databases that have gauges, so a deleted database's are removed.
        var databases: Set<String> = []
        /// Replication links that have state gauges.
        var links: Set<[String]> = []
    }
    private let scrape = Mutex(ScrapeState())

    /// An empty set of metrics.
    public init() {
        factory = PrometheusMetricsFactory(registry: registry)
    }

    /// Counts one answered request by route, method and status.
    func countRequest(_ request: RESTRequest, status: Int) {
        let method = Self.knownMethods.contains(request.method) ? request.method : "other"
        let key = RequestKey(route: Self.route(of: request.segments), method: method, status: status)
        // One counter per key, made once: making one per request was 1 % of a GET's CPU.
        let counter = requestCounters.withLock { counters in
            if let c = counters[key] { return c }
            let c = CoreMetrics.Counter(label: "ferry_http_requests_total",
                            dimensions: [("route", key.route.rawValue), ("method", method), ("status", String(status))], factory: factory)
            counters[key] = c
            return c
        }
        counter.increment()
    }

    /// What `ferry_http_requests_total` is counted by.
    private struct RequestKey: Hashable {
        var route: Route
        var method: String
        var status: Int
    }

    private let requestCounters = Mutex<[RequestKey: CoreMetrics.Counter]>([:])

    private static let knownMethods: Set<String> = ["GET", "HEAD", "PUT", "POST", "DELETE", "COPY", "OPTIONS"]

    /// The route a request's path falls under.
    public static func route(of segments: [String]) -> Route {
        guard let first = segments.first, !first.hasPrefix("_") else { return .server }
        guard segments.count > 1 else { return .database }
        switch segments[1] {
        case "_all_docs": return .all_docs
        case "_bulk_docs": return .bulk_docs
        case "_changes": return .changes
        case let s where s.hasPrefix("_"): return .other
        default: return segments.count == 2 ? .document : .attachment
        }
    }

    /// Refreshes the scrape-time values and renders everything in the text format.
    func render(_ sources: Sources) -> [UInt8] {
        scrape.withLock { st in
            refreshDatabases(sources.registry, &st)
            refreshReplications(sources.replications, &st)
            let http = sources.http
            gauge("ferry_open_connections", [("protocol", "http")], Double(http.openConnections))
            mirror("ferry_http_connections_total", [], http.connectionsAccepted, &st)
            mirror("ferry_http_received_bytes_total", [], http.bytesIn, &st)
            mirror("ferry_http_sent_bytes_total", [], http.bytesOut, &st)
            mirror("ferry_login_failures_total", [], sources.logins.failureCount, &st)
            mirror("ferry_login_throttled_total", [], sources.logins.refusalCount, &st)
            if let listener = sources.listener() {
                let s = listener.statistics
                gauge("ferry_open_connections", [("protocol", "blip")], Double(listener.connectionCount))
                mirror("ferry_blip_connections_total", [], s.connectionsAccepted, &st)
                mirror("ferry_blip_revisions_sent_total", [], s.revisionsSent, &st)
                mirror("ferry_blip_rev_messages_sent_total", [], s.revisionMessagesSent, &st)
                mirror("ferry_blip_revisions_received_total", [], s.revisionsReceived, &st)
            }
        }
        var out: [UInt8] = []
        registry.emit(into: &out)
        return out
    }

    private func refreshDatabases(_ databases: DatabaseRegistry, _ st: inout ScrapeState) {
        let all = databases.all
        for gone in st.databases.subtracting(all.keys) {
            for name in Self.databaseGauges { Gauge(label: name, dimensions: [("db", gone)], factory: factory).destroy() }
        }
        st.databases = Set(all.keys)
        for (name, db) in all {
            let labels = [("db", name)]
            // A database closed under us (deleted meanwhile) just skips this scrape.
            guard let live = try? db.documentCount(), let every = try? db.documentCount(includeDeleted: true) else { continue }
            gauge("ferry_database_documents", labels, Double(live))
            gauge("ferry_database_deleted_documents", labels, Double(every - live))
            if let conflicts = try? db.conflictedDocumentIDs().count {
                gauge("ferry_database_conflicts", labels, Double(conflicts))
            }
            gauge("ferry_database_last_sequence", labels, Double(db.lastSequence))
            gauge("ferry_database_file_bytes", labels, Double(db.fileBytes))
        }
    }

    private static let databaseGauges = ["ferry_database_documents", "ferry_database_deleted_documents", "ferry_database_conflicts",
                                         "ferry_database_last_sequence", "ferry_database_file_bytes"]

    private func refreshReplications(_ replications: ReplicationRegistry, _ st: inout ScrapeState) {
        let snapshots = replications.snapshots
        let current = Set(snapshots.map { [$0.target, $0.database] })
        for gone in st.links.subtracting(current) {
            for state in Self.states {
                Gauge(label: "ferry_replication_state", dimensions: [("target", gone[0]), ("db", gone[1]), ("state", state.rawValue)],
                      factory: factory).destroy()
            }
        }
        st.links = current
        for s in snapshots {
            let labels = [("target", s.target), ("db", s.database)]
            // One gauge per state, 1 for the current one: the usual Prometheus shape for an
            // enumeration, which `max by (state)` and alerts on `state="offline"` read directly.
            for state in Self.states {
                gauge("ferry_replication_state", labels + [("state", state.rawValue)], state == s.state ? 1 : 0)
            }
            mirror("ferry_replication_documents_pushed_total", labels, s.documentsPushed, &st)
            mirror("ferry_replication_documents_pulled_total", labels, s.documentsPulled, &st)
            mirror("ferry_replication_conflicts_total", labels, s.conflicts, &st)
            mirror("ferry_replication_errors_total", labels, s.errors, &st)
            gauge("ferry_replication_last_error_timestamp_seconds", labels, s.lastErrorTime ?? 0)
        }
    }

    private static let states: [ActivityLevel] = [.stopped, .offline, .connecting, .idle, .busy]

    private func gauge(_ name: String, _ labels: [(String, String)], _ value: Double) {
        Gauge(label: name, dimensions: labels, factory: factory).record(value)
    }

    /// Brings a counter up to `total` (a running total kept elsewhere). A total that went
    /// down (its source was replaced) is taken as the new base rather than undone: counters
    /// only go up.
    private func mirror(_ name: String, _ labels: [(String, String)], _ total: Int, _ st: inout ScrapeState) {
        let key = ([name] + labels.map { "\($0.0)=\($0.1)" }).joined(separator: "\u{0}")
        let last = st.mirrored[key] ?? 0
        let counter = Counter(label: name, dimensions: labels, factory: factory)
        if total > last { counter.increment(by: total - last) }
        st.mirrored[key] = total
    }
}
