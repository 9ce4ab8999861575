import FerryStore

/// A replication checkpoint a database holds (Protocol/replication.md, "Checkpoints"), as
/// `ferry info` lists them: the ones this database's replicators keep for their peers
/// (`checkpoint/<ID>`, written by `Checkpointer`) and the ones it keeps for clients that
/// replicate with it (`peerCheckpoint/<client>`, written by the listener's `CheckpointServer`).
public struct ReplicationCheckpoint: Sendable, Equatable {
    /// Which side of the replication kept it.
    public enum Side: String, Sendable {
        /// This database's replicator, about a peer it connected to.
        case replicator
        /// This database's listener, on behalf of a client that connected to it.
        case listener
    }

    /// Which side kept it.
    public let side: Side
    /// The checkpoint ID (`cp-…`: a digest of this database's UUID, the peer's URL and the
    /// filters; for the listener side, the client's ID).
    public let id: String
    /// The peer's URL when it is known: a replicator's checkpoint whose ID matches a peer this
    /// database keeps revisions for, replicating without filters. Nil otherwise.
    public let peer: String?
    /// The local sequence up to which everything was pushed.
    public let local: Int64?
    /// The peer's sequence up to which everything was pulled (the peer's own format).
    public let remote: JSONValue?
    /// The local document's revision (`0-N`: N saves).
    public let revision: String

    /// Every checkpoint `database` holds, replicators' first, each by ID.
    public static func all(in database: Database) throws(StoreError) -> [ReplicationCheckpoint] {
        var peers: [String: String] = [:]
        for address in try database.remoteAddresses() {
            let id = Checkpointer(configuration: ReplicatorConfiguration(database: database, target: address)).id
            peers[id] = address
        }
        var out: [ReplicationCheckpoint] = []
        for doc in try database.localDocuments(withPrefix: "checkpoint/") {
            let id = String(doc.id.dropFirst("checkpoint/".count))
            out.append(ReplicationCheckpoint(side: .replicator, id: id, peer: peers[id], local: doc.properties["local"]?.intValue,
                                             remote: doc.properties["remote"], revision: doc.revision))
        }
        for doc in try database.localDocuments(withPrefix: "peerCheckpoint/") {
            out.append(ReplicationCheckpoint(side: .listener, id: String(doc.id.dropFirst("peerCheckpoint/".count)), peer: nil,
                                             local: doc.properties["local"]?.intValue, remote: doc.properties["remote"],
                                             revision: doc.revision))
        }
        return out
    }
}
