import FerryBLIP
import FerryStore

/// Builds and reads `rev` messages (Protocol/replication.md, "rev"): properties `id`, `rev`, `history` (the
/// ancestors, newest first, comma-separated, cut at the first revision the receiver has and
/// at `maxHistory`), `deleted`, `sequence`, `noconflicts`; the body is the revision's JSON
/// without meta properties.
enum RevMessage {
    /// The `rev` request for `revisionID` of a document, or nil if that revision's body is no
    /// longer kept (`revision` is nil: the caller sends `norev`). The history is `revision`'s
    /// ancestors, cut after the first one the receiver has (`knownRevisions`).
    static func make(_ revision: OutgoingRevision?, documentID: String, revisionID rev: RevisionID, knownRevisions: [String],
                     sequence: JSONValue, noConflicts: Bool) -> BLIPMessage? {
        guard let revision else { return nil }
        // Usually none or a few known: a set then costs more than it saves.
        let known: Set<String>? = knownRevisions.count > 8 ? Set(knownRevisions) : nil
        var history: [String] = []
        history.reserveCapacity(revision.ancestors.count)
        for ancestor in revision.ancestors {
            let text = ancestor.description
            history.append(text)
            if known?.contains(text) ?? knownRevisions.contains(text) { break }
        }
        typealias P = ReplicationProtocol.Property
        // Built as one array of distinct keys: this runs once per revision sent.
        var pairs: [(key: String, value: String)] = []
        pairs.reserveCapacity(6)
        pairs.append((P.id, documentID))
        pairs.append((P.rev, rev.description))
        if !history.isEmpty { pairs.append((P.history, history.joined(separator: ","))) }
        if revision.isDeleted { pairs.append((P.deleted, "1")) }
        pairs.append((P.sequence, text(of: sequence)))
        if noConflicts { pairs.append((P.noConflicts, "1")) }
        return .request(profile: ReplicationProtocol.Profile.rev, properties: BLIPProperties(pairs: pairs), body: revision.body,
                        compressed: revision.body.count >= ReplicatorTuning.compressThreshold)
    }

    /// A sequence as its JSON text (an integer without the encoder's round trip).
    static func text(of sequence: JSONValue) -> String {
        if case .int(let n) = sequence { return String(n) }
        return String(decoding: CanonicalJSON.encode(sequence), as: UTF8.self)
    }

    /// A `norev` for a revision that cannot be sent (NoReply).
    static func makeNoRev(documentID: String, revisionID: String, sequence: JSONValue, status: Int, reason: String) -> BLIPMessage {
        .request(profile: ReplicationProtocol.Profile.norev, properties: [(ReplicationProtocol.Property.id, documentID), (ReplicationProtocol.Property.rev, revisionID),
                                                (ReplicationProtocol.Property.sequence, text(of: sequence)),
                                                (ReplicationProtocol.Property.error, String(status)), (ReplicationProtocol.Property.reason, reason)], noReply: true)
    }

    /// Reads a received `rev` into a revision to insert; bad properties are a typed error.
    static func read(_ m: BLIPMessage) throws(ReplicationError) -> ReplicatedRevision {
        guard let id = m.properties[ReplicationProtocol.Property.id], !id.isEmpty, id.utf8.count <= ReplicationMessages.maxDocumentIDLength,
              let rev = m.properties[ReplicationProtocol.Property.rev], !rev.isEmpty else {
            throw .protocolError("rev: missing docID or rev")
        }
        let deleted = m.properties[ReplicationProtocol.Property.deleted].map { $0 == "1" || $0 == "true" } ?? false
        return ReplicatedRevision(documentID: id, history: [rev] + ReplicationMessages.decodeHistory(m.properties[ReplicationProtocol.Property.history]),
                                  body: m.body.isEmpty ? Array("{}".utf8) : m.body, isDeleted: deleted)
    }
}
