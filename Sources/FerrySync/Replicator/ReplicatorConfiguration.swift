import FerryNet
import FerryStore
import FerryWebSocket

/// Everything a `Replicator` needs, as a value (Couchbase Lite's `ReplicatorConfiguration`,
/// docs/sync.md). Only `database` and `target` are required.
public struct ReplicatorConfiguration: Sendable {
    /// Which directions to replicate.
    public enum ReplicatorType: String, Sendable, CaseIterable {
        /// Local changes go to the peer.
        case push
        /// The peer's changes come here.
        case pull
        /// Both.
        case pushAndPull
    }

    /// Which protocol speaks to the peer.
    public enum PeerProtocol: String, Sendable, CaseIterable {
        /// By the URL's scheme: `http(s)://` CouchDB's replication protocol, `ws(s)://` BLIP.
        case automatic
        /// CouchDB's HTTP replication protocol (CouchDB, Cloudant, PouchDB Server, `ferry serve`).
        case couchDB = "couchdb"
        /// The Couchbase replication protocol over WebSocket (Couchbase Lite, Sync Gateway,
        /// Ferry peers); an `http(s)://` URL is reached as `ws(s)://` (a Sync Gateway given so).
        case blip
    }

    /// HTTP authentication sent with the upgrade request.
    public enum Authenticator: Sendable, Equatable {
        /// `Authorization: Basic …`, sent pre-emptively.
        case basic(user: String, password: String)
    }

    /// The local database.
    public var database: Database
    /// The peer's database URL: `ws(s)://host:port/<db>` for BLIP (`/_blipsync` is
    /// appended), `http(s)://host:port/<db>` for CouchDB's protocol (see `peerProtocol`).
    public var target: String
    /// Which protocol to speak (default: by the URL's scheme).
    public var peerProtocol = PeerProtocol.automatic
    /// Push, pull or both (default both).
    public var type: ReplicatorType = .pushAndPull
    /// Keep running after catching up, propagating new changes both ways as they happen.
    public var continuous = false
    /// Replicate only these documents (both directions); nil = all.
    public var documentIDs: [String]?
    /// Push only documents this returns true for; given the document (a tombstone's kept
    /// fields included), its flags and `pushFilterParameters`.
    public var pushFilter: PushFilter?
    /// Parameters handed to `pushFilter`.
    public var pushFilterParameters: [String: JSONValue] = [:]
    /// The name of a pull filter registered on the serving peer (`SyncListener.registerPullFilter`).
    public var pullFilter: String?
    /// Parameters for the pull filter (sent as `subChanges` properties).
    public var pullFilterParameters: [String: String] = [:]
    /// A Mango selector for both directions, as CouchDB's replicator applies one: the peer
    /// applies it to what is pulled (CouchDB's `filter=_selector`, or for a Ferry peer over
    /// BLIP the `_selector` filter of `subChanges`, a Ferry extension; a named `pullFilter`
    /// takes precedence), and a push sends only local documents matching it.
    public var selector: JSONValue?
    /// `_bulk_get` requests in flight at once when pulling from a CouchDB peer (CouchDB's
    /// replicator runs four workers).
    public var maxConcurrentFetches = 4
    /// How pulled conflicts are resolved. nil or `.default`: as the database's `ConflictPolicy`
    /// says — the default rule (a deletion wins; then the longer branch; then the higher
    /// revision ID) in the insert's own transaction, or nothing under `keep`. A custom resolver
    /// (`ConflictResolver.custom`) runs just after the commit, under either policy; when it
    /// throws or answers with another database's document, the conflict stays, a `.failed`
    /// document event reports it, and the next start (or `stop()`) tries again.
    public var conflictResolver: ConflictResolver?
    /// Credentials for the peer.
    public var authenticator: Authenticator?
    /// Extra HTTP headers for the upgrade request.
    public var headers: [String: String] = [:]
    /// WebSocket settings (limits, timeouts); the BLIP defaults when nil.
    public var webSocket: WebSocketConfiguration?
    /// How a `wss://` target is verified (and our client certificate, for mutual TLS). The
    /// default trusts the system store and checks the host name; peer-to-peer setups with
    /// self-signed certificates pin them (`TLSTrust.pinnedCertificatesOnly` plus `pins`).
    public var tls = TLSClientConfiguration()
    /// Seconds between WebSocket pings; a peer that misses the pong for `heartbeat` more
    /// seconds is considered dead and the connection is retried.
    public var heartbeat: Double = 300
    /// Connection attempts before giving up (0 = default: 10 for one-shot, unlimited for
    /// continuous).
    public var maxAttempts = 0
    /// The longest wait between attempts, in seconds (backoff doubles from 1 s up to this).
    public var maxAttemptWaitTime: Double = 300
    /// Give up rather than retry past this many seconds of the peer being unreachable in a row,
    /// however many attempts are left (0 = no limit, the default): a one-shot sync that should
    /// fail fast.
    public var maxOfflineTime: Double = 0
    /// Documents per `changes`/`proposeChanges` message (and per checkpoint step).
    public var batchSize = ReplicatorConfiguration.defaultBatchSize
    /// The most revisions a pull has asked for and not stored yet (on their way, their
    /// attachments downloading, or queued for the writer) before it takes no further `changes`
    /// message (as LiteCore's puller does past `kDefaultMaxRevsBeingRequested`). So at most this plus one batch
    /// are pending, however many `changes` messages the peer keeps in flight; it bounds what a
    /// peer can pile up in memory. Values below 1 count as 1. nil (the default): as many as a
    /// Ferry pusher keeps in flight at this `batchSize` (four batches), so against a Ferry
    /// peer the gate never closes.
    public var maxConcurrentRevisions: Int?
    /// Which attachments of pulled revisions to download, and in what order (nil = every one,
    /// each before its revision is stored). With a policy, revisions are stored first and the
    /// wanted attachments downloaded by priority once the pull has caught up; skipped ones keep
    /// their metadata, unfetched, until `Replicator.fetchAttachments` gets them
    /// (Protocol/download-rules.md).
    public var attachmentDownloadPolicy: AttachmentDownloadPolicy?
    /// Start from scratch instead of the saved checkpoint (the next run saves a new one).
    public var resetCheckpoint = false

    /// The batch size a configuration starts with: 500, as CouchDB's replicator
    /// (`worker_batch_size`) and LiteCore's first puller. A pull feed keeps one batch of `rev`s
    /// unanswered, so the batch sets how full the pipe stays; it is also at most what a killed
    /// pull is sent again.
    public static let defaultBatchSize = ReplicatorTuning.batchSize

    /// Whether the peer speaks CouchDB's HTTP protocol (by `peerProtocol`, else the scheme).
    public var usesCouchDBProtocol: Bool {
        switch peerProtocol {
        case .couchDB: return true
        case .blip: return false
        case .automatic:
            let t = target.lowercased()
            return t.hasPrefix("http://") || t.hasPrefix("https://")
        }
    }

    /// The gate a pull uses: `maxConcurrentRevisions`, or four batches when that is nil.
    var effectiveMaxConcurrentRevisions: Int {
        maxConcurrentRevisions ?? ReplicatorTuning.maxPendingRevisions(batchSize: batchSize)
    }

    /// A configuration for replicating `database` with the peer at `target`.
    public init(database: Database, target: String) {
        self.database = database
        self.target = target
    }
}

/// Flags of a document handed to filters and events.
public struct DocumentFlags: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// The revision is a tombstone.
    public static let deleted = DocumentFlags(rawValue: 1)
    /// The peer revoked access (Sync Gateway removal); the document is not replicated.
    public static let accessRemoved = DocumentFlags(rawValue: 2)
}

/// A push filter: the document (tombstone fields included), its flags and the parameters.
public typealias PushFilter = @Sendable (Document, DocumentFlags, [String: JSONValue]) -> Bool

/// A pull filter registered on a serving peer: the document, its flags and the parameters the
/// client sent.
public typealias PullFilter = @Sendable (Document, DocumentFlags, [String: String]) -> Bool
