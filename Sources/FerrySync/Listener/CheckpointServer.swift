import FerryBLIP
import FerryStore

/// The listener's side of checkpoints (Protocol/replication.md, "getCheckpoint / setCheckpoint"):
/// keeps each client's checkpoint as a local document `peerCheckpoint/<client>`, so a client
/// that restarts, or lost its own copy, learns where it stood. A save names the revision it
/// replaces; a stale one is refused with 409.
enum CheckpointServer {
    /// Answers one `getCheckpoint` or `setCheckpoint` request.
    static func handle(_ request: BLIPIncomingRequest, database: Database) async {
        let m = request.message
        guard let client = m.properties[ReplicationProtocol.Property.client], !client.isEmpty else {
            return request.respondHTTPError(400, "missing client")
        }
        let id = "peerCheckpoint/" + client
        if m.profile == ReplicationProtocol.Profile.getCheckpoint {
            do {
                guard let doc = try database.localDocument(id) else { return request.respondHTTPError(404, "missing") }
                request.respond(properties: [(ReplicationProtocol.Property.rev, doc.revision)],
                                body: CanonicalJSON.encode(.object(doc.properties)))
            } catch { request.respondHTTPError(error.wireStatus, error.wireMessage) }
            return
        }
        do {
            let props = try JSONParser.parseObject(m.body, sizeLimit: 1 << 20)
            let rev = m.properties[ReplicationProtocol.Property.rev].flatMap { $0.isEmpty ? nil : $0 }
            if rev == nil, try database.localDocument(id) != nil {
                return request.respondHTTPError(409, "revision ID mismatch")
            }
            let newRev = try await database.write { (d) throws(StoreError) in try d.putLocalDocument(id, properties: props, expectedRevision: rev) }
            request.respond(properties: [(ReplicationProtocol.Property.rev, newRev)])
        } catch .conflict {
            request.respondHTTPError(409, "revision ID mismatch")
        } catch .notFound {
            request.respondHTTPError(409, "revision ID mismatch")
        } catch { request.respondHTTPError(error.wireStatus, error.wireMessage) }
    }
}
