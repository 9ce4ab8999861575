import FerryStore

/// `GET /{db}/{docid}?open_revs=all|[…]` (Protocol/rest.md, "Attachments"): the revisions a
/// replicator asks for by ID. JSON by default (`[{"ok": doc} | {"missing": rev}]`); with
/// `Accept: multipart/mixed`, as CouchDB's replicator asks, one part per revision (a
/// revision whose attachments carry bytes is a nested `multipart/related` part, a missing one
/// `application/json; error="true"`). `revs`, `latest`, `attachments` and `atts_since` as in
/// CouchDB (`atts_since` implies `attachments`, and so does a multipart answer).
extension RESTRouter {
    /// The leaves in the order CouchDB's key tree lists them (couch_key_tree:get_all_leafs,
    /// which `_bulk_get` answers in): the trees of later roots first, each depth first with
    /// siblings by ascending revision ID.
    static func leavesInTreeOrder(_ tree: RevisionTree) -> [RevisionID] {
        var children: [RevisionID: [RevisionID]] = [:]
        var roots: [RevisionID] = []
        for node in tree.nodes.values {
            if let p = node.parent, tree.nodes[p] != nil { children[p, default: []].append(node.revisionID) } else { roots.append(node.revisionID) }
        }
        let leaves = Set(tree.leaves.map(\.revisionID))
        var out: [RevisionID] = []
        for root in roots.sorted(by: >) {
            var stack = [root]
            while let r = stack.popLast() {
                if leaves.contains(r) { out.append(r) }
                stack += (children[r] ?? []).sorted(by: >)
            }
        }
        return out
    }

    func openRevisions(_ c: Context, _ id: String, _ spec: String) throws(RESTError) -> RESTResponse {
        let r = c.request
        let flag = { (name: String) in r[query: name] == "true" }
        let attsSince = try AttachmentRendering.attsSince(r)
        let multipart = Self.accepts(r, "multipart/mixed")
        // CouchDB sends attachment bytes in a multipart answer whatever `attachments` says
        // (its replicator does not ask for them: it relies on this).
        let withBytes = multipart || flag("attachments") || attsSince != nil
        do {
            let tree = try c.db.revisionTree(of: id)
            var wanted: [String]
            if spec == "all" {
                guard let tree else { throw RESTError.notFound("missing") }
                // CouchDB's single-document open_revs answers its leaves sorted by revision.
                wanted = tree.leaves.map(\.revisionID).sorted().map(\.description)
            } else {
                guard case .array(let a)? = try? JSONParser.parse(Array(spec.utf8)) else {
                    throw RESTError.badRequest("open_revs must be \"all\" or a JSON array of revisions")
                }
                wanted = a.compactMap(\.stringValue)
            }
            // One answer per revision: the revision, or with `latest` the leaves under it.
            var answers: [(asked: String, doc: Document?)] = []
            var seen = Set<String>()
            for text in wanted {
                // A revision that is not here (or not a revision ID) is answered `missing`; a
                // store failure is the request's failure.
                var docs: [Document] = []
                do { docs = try Self.bulkGetRevisions(c.db, id: id, rev: text, latest: flag("latest")) }
                catch let e as StoreError where e.isFatal { throw e } catch {}
                if docs.isEmpty { answers.append((text, nil)) }
                for d in docs where seen.insert(d.revisionID?.description ?? "").inserted { answers.append((text, d)) }
            }
            var jsonItems: [JSONValue] = []
            var writer = MultipartWriter()
            for (asked, doc) in answers {
                guard let doc else {
                    let missing = JSONValue.object(["missing": .string(asked)])
                    jsonItems.append(missing)
                    writer.part([("Content-Type", "application/json; error=\"true\"")], CanonicalJSON.encode(missing))
                    continue
                }
                let since = AttachmentRendering.sinceGeneration(attsSince, rev: doc.revisionID, tree: tree)
                let mode: AttachmentRendering.Mode = withBytes ? (multipart ? .follows : .inline) : .stubs
                let (json, parts) = Self.documentObject(c.db, doc, tree: tree, revs: flag("revs"), mode: mode, since: since)
                jsonItems.append(.object(["ok": .object(json)]))
                guard multipart else { continue }
                writer.revision(json, attachments: parts)
            }
            guard multipart else { return .json(200, .array(jsonItems)) }
            return RESTResponse(status: 200, headers: [("Content-Type", writer.contentType("mixed"))], body: .bytes(writer.finished()))
        } catch {
            throw RESTError.from(error)
        }
    }
}
