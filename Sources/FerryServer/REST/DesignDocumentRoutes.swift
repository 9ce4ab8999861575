import FerryStore
import FoundationEssentials

/// `/{db}/_design/{name}` and `/{db}/_design/{name}/{attname}` (Protocol/rest.md, "Design
/// documents"): design documents are documents — stored, listed, replicated and served like
/// any other, writing one needing the admin role. Ferry keeps their functions but runs none of
/// them: the paths that would (`_view`, `_show`, `_list`, `_update`, `_rewrite`, `_search`,
/// `_nouveau`, `_info`) are answered 501 `not_implemented` naming what is missing, and are
/// never taken for attachment names.
extension RESTRouter {
    /// Why each design-document function path is not served, by its path segment.
    static let designFunctionReasons: [String: String] = [
        "_view": "Ferry does not run JavaScript views (_view)",
        "_show": "Ferry does not run show functions (_show)",
        "_list": "Ferry does not run list functions (_list)",
        "_update": "Ferry does not run update functions (_update)",
        "_rewrite": "Ferry does not run rewrite rules (_rewrite)",
        "_search": "Ferry has no full-text search (_search)",
        "_search_info": "Ferry has no full-text search (_search_info)",
        "_nouveau": "Ferry has no full-text search (_nouveau)",
        "_nouveau_info": "Ferry has no full-text search (_nouveau_info)",
        "_info": "Ferry builds no view indexes (_info)",
    ]

    /// Answers a path under a database whose first segment is `_design` (`path` then goes on
    /// with the name) or a whole design ID (`_design/NAME`, sent with its slash encoded).
    func designDocumentRoute(_ c: Context, _ path: ArraySlice<String>) async throws(RESTError) -> RESTResponse {
        var rest = path
        guard let first = rest.popFirst() else { throw .notFound("missing") }
        let id: String
        if first == "_design" {
            guard let name = rest.popFirst() else {
                // `/db/_design` names no document: CouchDB refuses a write there as an ID.
                throw c.request.method == "PUT" ? .illegalDocumentID(first) : .notFound("missing")
            }
            id = Document.designPrefix + name
        } else {
            // CouchDB redirects a read of `_design%2FNAME` to `_design/NAME` (301); writes take
            // the encoded form as the ID.
            if ["GET", "HEAD"].contains(c.request.method) { return Self.designRedirect(c.request) }
            id = first
        }
        guard let next = rest.first else { return try await document(c, id) }
        if let reason = Self.designFunctionReasons[next] {
            // As CouchDB: a design document that is not there is 404 before anything else.
            let exists: Bool
            do { exists = try c.db.document(id) != nil } catch { throw RESTError(error) }
            guard exists else { throw .notFound("missing") }
            throw .notImplemented(reason)
        }
        return try await attachment(c, id, rest.joined(separator: "/"))
    }

    /// CouchDB's 301 from a target naming `_design%2F…` to the same target with `_design/`
    /// (the escape matched in either case), as an absolute URL and with an empty body.
    static func designRedirect(_ r: RESTRequest) -> RESTResponse {
        let target = r.head.target.replacing(/_design%2F/.ignoresCase(), with: "_design/")
        return RESTResponse(status: 301, headers: [("Location", target)], body: .bytes([]))
    }

    /// `GET|POST /{db}/_design_docs`: `_all_docs` over design documents only.
    func designDocs(_ c: Context) throws(RESTError) -> RESTResponse {
        try allDocs(c, designOnly: true)
    }
}
