import FerryStore

/// `POST /{db}/_revs_diff` and `/{db}/_revs_limit` (Protocol/rest.md, "Replication
/// endpoints"): what a CouchDB-protocol replicator asks before it pushes — which revisions
/// this database lacks, and how much history it keeps.
extension RESTRouter {
    /// `{"docid":["rev",…]}` → `{"docid":{"missing":[…],"possible_ancestors":[…]}}`, listing only
    /// documents with missing revisions. A revision is known when it is anywhere in the tree
    /// (bodies of inner revisions are gone, but the replicator needs only the ID); the possible
    /// ancestors are the leaves older than some missing revision, which the pusher can use as
    /// the base of what it sends.
    func revsDiff(_ c: Context) throws(RESTError) -> RESTResponse {
        let diff = try missingRevisions(c)
        return .json(200, .object(diff.mapValues { entry in
            var o: [String: JSONValue] = ["missing": .array(entry.missing.map { .string($0) })]
            if !entry.ancestors.isEmpty { o["possible_ancestors"] = .array(entry.ancestors.map { .string($0) }) }
            return .object(o)
        }))
    }

    /// `POST /{db}/_missing_revs` (CouchDB 1.x replicators ask it): `{"missing_revs":{"docid":[…]}}`,
    /// the same as `_revs_diff` without the ancestors.
    func missingRevs(_ c: Context) throws(RESTError) -> RESTResponse {
        let diff = try missingRevisions(c)
        return .json(200, .object(["missing_revs": .object(diff.mapValues { .array($0.missing.map { .string($0) }) })]))
    }

    /// The body's revisions this database lacks, and the leaves older than them, per document.
    private func missingRevisions(_ c: Context) throws(RESTError) -> [String: (missing: [String], ancestors: [String])] {
        try Self.allow(c.request, ["POST"])
        let body = try Self.jsonObject(c.request)
        var out: [String: (missing: [String], ancestors: [String])] = [:]
        for (id, value) in body {
            guard let revs = value.arrayValue else { throw .badRequest("_revs_diff: the value of \(id.debugDescription) must be an array of revisions") }
            let tree: RevisionTree?
            do { tree = try c.db.revisionTree(of: id) } catch { throw RESTError(error) }
            var missing: [String] = []
            var ancestors = Set<RevisionID>()
            for r in revs {
                guard let text = r.stringValue else { throw .badRequest("_revs_diff: revisions must be strings") }
                // Text that is no revision is CouchDB's 400; one in CouchDB's looser syntax
                // that Ferry cannot hold is missing.
                guard let rev = try Self.parseRevision(text) else { missing.append(text); continue }
                if tree?.nodes[rev] != nil { continue }
                missing.append(text)
                for leaf in tree?.leaves ?? [] where leaf.revisionID.generation < rev.generation {
                    ancestors.insert(leaf.revisionID)
                }
            }
            guard !missing.isEmpty else { continue }
            out[id] = (missing, ancestors.sorted(by: >).map(\.description))
        }
        return out
    }

    /// `GET` answers the store's revision tree depth as a bare integer. Ferry's depth is fixed
    /// when the database is opened, so a `PUT` (admin) is accepted only when it changes nothing.
    func revsLimit(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "PUT"])
        let limit = c.db.options.maxRevisionTreeDepth
        guard c.request.method == "PUT" else { return .json(200, .int(Int64(limit))) }
        try require(.admin, c)
        guard let asked = (try? JSONParser.parse(try c.request.decodedBody(), sizeLimit: 64))?.intValue else {
            throw .badRequest("_revs_limit must be a JSON integer")
        }
        guard asked == Int64(limit) else {
            throw .badRequest("Ferry keeps \(limit) revisions per document; the limit cannot be changed over REST")
        }
        return .ok()
    }
}
