/// The names the replication protocol gives things on the wire, in one place: the app
/// protocol, the message profiles, their properties and the error domains
/// (Protocol/replication.md describes each message; the spellings are Couchbase's).
enum ReplicationProtocol {
    /// The replication app protocol; the WebSocket subprotocol is `BLIP_3+` this.
    static let app = "CBMobile_3"

    /// A database's replication endpoint, under its URL.
    static let endpoint = "_blipsync"

    /// Message profiles.
    enum Profile {
        static let getCheckpoint = "getCheckpoint"
        static let setCheckpoint = "setCheckpoint"
        static let subChanges = "subChanges"
        static let changes = "changes"
        static let proposeChanges = "proposeChanges"
        static let rev = "rev"
        static let norev = "norev"
        static let getAttachment = "getAttachment"
    }

    /// Message properties.
    enum Property {
        /// Checkpoint messages: the checkpoint's ID, and its revision.
        static let client = "client"
        static let rev = "rev"
        /// `subChanges`.
        static let since = "since"
        static let continuous = "continuous"
        static let batch = "batch"
        static let filter = "filter"
        /// The properties of `subChanges` that are not parameters of its pull filter.
        /// The `subChanges` filter name of a Mango selector pull (a Ferry extension), and the
        /// property that carries the selector's JSON.
        static let selectorFilter = "_selector"
        static let selector = "selector"
        static let subChangesOwn: Set<String> = ["Profile", since, continuous, batch, "activeOnly", filter,
                                                 "channels", "revocations", "sendReplacementRevs", "versioning",
                                                 "requestPlus", "future", "collection", "client_sgr2"]
        /// A `changes` reply: ancestors the sender should include at most.
        static let maxHistory = "maxHistory"
        /// `proposeChanges`: the sender wants a conflict's current revision with its 409.
        static let conflictIncludesRev = "conflictIncludesRev"
        /// `rev` and `norev`.
        static let id = "id"
        static let history = "history"
        static let deleted = "deleted"
        static let sequence = "sequence"
        static let noConflicts = "noconflicts"
        static let error = "error"
        static let reason = "reason"
        /// `getAttachment`.
        static let digest = "digest"
        static let docID = "docID"
        static let compress = "compress"
    }

    /// Error domains of error responses.
    enum Domain {
        /// HTTP statuses: Sync Gateway's domain for replication errors (409, 403, 503, ...).
        static let http = "HTTP"
    }
}
