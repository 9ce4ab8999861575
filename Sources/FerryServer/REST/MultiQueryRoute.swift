import FerryHTTP
import FerryStore

extension RESTRouter {
    /// `POST /{db}/_all_docs/queries` (and `_design_docs/queries`): `{"queries":[{…},…]}`, each
    /// query what a `POST /{db}/_all_docs` body holds, answered `{"results":[…]}` in order —
    /// CouchDB's multi-query form, run here as that many `_all_docs` requests.
    func multiQuery(_ c: Context, designOnly: Bool) throws(RESTError) -> RESTResponse {
        let body = try Self.jsonObject(c.request)
        guard let queries = body["queries"]?.arrayValue else { throw .badRequest("`queries` member must be an array.") }
        var results: [JSONValue] = []
        for query in queries {
            guard query.objectValue != nil else { throw .badRequest("Each query must be an object.") }
            let single = try Self.postRequest(like: c.request, body: CanonicalJSON.encode(query))
            let answer = try allDocs(Context(request: single, identity: c.identity, name: c.name, db: c.db, role: c.role), designOnly: designOnly)
            guard case .bytes(let bytes) = answer.body, let result = try? JSONParser.parse(bytes) else {
                throw RESTError(500, "error", "a query gave no JSON answer")
            }
            results.append(result)
        }
        return .json(200, .object(["results": .array(results)]))
    }

    /// A JSON `POST` to `request`'s path with `body`, from the same client.
    static func postRequest(like request: RESTRequest, body: [UInt8]) throws(RESTError) -> RESTRequest {
        var decoder = HTTPRequestDecoder()
        let path = request.head.target.prefix { $0 != "?" }
        let head = "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n"
        guard let events = try? decoder.feed(Array(head.utf8)),
              let h = events.lazy.compactMap({ if case .head(let h) = $0 { return h } else { return nil } }).first,
              let r = RESTRequest(head: h, body: body, remoteAddress: request.remoteAddress, peerCertificate: request.peerCertificate,
                                  isSecure: request.isSecure) else {
            throw .badRequest("the request target is not a path with valid escapes")
        }
        return r
    }
}
