import FerryStore

/// `POST /{db}/_purge`, `/_compact` and `/_ensure_full_commit` (Protocol/rest.md,
/// "Maintenance and queries").
extension RESTRouter {
    /// `{"docid":["rev",…]}` → `{"purge_seq":null,"purged":{"docid":[revs]}}` (writer), every
    /// document named listed with the revisions purged (none for an unknown document or
    /// revision, as CouchDB answers). Named leaves are purged branch by branch; when they
    /// cover every open leaf the whole document goes.
    func purge(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try require(.writer, c)
        let body = try Self.jsonObject(c.request)
        var requests: [(id: String, revs: [String])] = []
        for (id, value) in body {
            guard let revs = value.arrayValue?.compactMap(\.stringValue), revs.count == value.arrayValue?.count else {
                throw .badRequest("_purge: the value of \(id.debugDescription) must be an array of revision strings")
            }
            // CouchDB refuses text that is no revision before it purges anything.
            for r in revs { _ = try Self.parseRevision(r) }
            requests.append((id, revs))
        }
        var purged: [String: JSONValue] = [:]
        for (id, revs) in requests.sorted(by: { $0.id < $1.id }) {
            purged[id] = .array([])
            do {
                guard let tree = try c.db.revisionTree(of: id) else { continue }
                let named = revs.compactMap { try? RevisionID($0) }.filter { tree.isLeaf($0) }
                // A closed leaf is the tombstone Ferry left on a resolved conflict's losing
                // branch: no client made it, so none has to name it.
                let open = tree.leaves.filter { !$0.isClosed }.map(\.revisionID)
                if !open.isEmpty, open.allSatisfy(named.contains) {
                    try c.db.purge(id)
                } else {
                    for rev in named { try c.db.purge(id, revision: rev) }
                }
                let gone = Set(named.map(\.description))
                purged[id] = .array(revs.filter(gone.contains).map { .string($0) })
            } catch .notFound {
                continue  // purged meanwhile by someone else: nothing left to report
            } catch {
                throw RESTError(error)
            }
        }
        return .json(201, .object(["purge_seq": .null, "purged": .object(purged)]))
    }

    /// `GET|PUT /{db}/_purged_infos_limit`: how many purges CouchDB remembers for its
    /// replicators. Ferry keeps no purge history to bound, so it reports CouchDB's default
    /// (1000) and takes a `PUT` of a positive integer (admin) without keeping it.
    func purgedInfosLimit(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "PUT"])
        guard c.request.method == "PUT" else { return .json(200, .int(1000)) }
        try require(.admin, c)
        guard let n = (try? JSONParser.parse(try c.request.decodedBody(), sizeLimit: 64))?.intValue, n > 0 else {
            throw .badRequest("`purged_infos_limit` must be positive integer")
        }
        return .ok()
    }

    /// Deletes the blobs no revision references any more (admin), answered 202 as CouchDB's
    /// background compaction is, though here it has finished by then.
    func compact(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try Self.requireJSONType(c.request)
        try require(.admin, c)
        do { try c.db.compact() } catch { throw RESTError(error) }
        return .ok(202)
    }

    /// Every commit is already durable to the store's setting; older replicators still call
    /// this after each batch.
    func ensureFullCommit(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["POST"])
        try Self.requireJSONType(c.request)
        return .json(201, .object(["ok": true, "instance_start_time": "0"]))
    }

    /// CouchDB's `validate_ctype` on these routes: the request must declare
    /// `application/json`, even without a body (none declared is 415 too).
    static func requireJSONType(_ r: RESTRequest) throws(RESTError) {
        guard let type = r.header("Content-Type"), MediaType.essence(type[...]) == "application/json" else {
            throw .badContentType("Content-Type must be application/json")
        }
    }
}
