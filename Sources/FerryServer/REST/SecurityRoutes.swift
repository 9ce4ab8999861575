import FerryStore

extension RESTRouter {
    /// `GET /db/_security` (any member) and `PUT` (a database admin): the database's
    /// `SecurityObject`. A database whose object was never set answers CouchDB 3's
    /// admin-only default. A malformed object is 400 (CouchDB answers 500).
    func security(_ c: Context) throws(RESTError) -> RESTResponse {
        try Self.allow(c.request, ["GET", "HEAD", "PUT"])
        if c.request.method == "PUT" {
            try require(.admin, c)
            let body = try c.request.decodedBody()
            let json: JSONValue
            do { json = try JSONParser.parse(body, sizeLimit: 1 << 20) } catch { throw .badRequest("invalid JSON: \(error)") }
            do { _ = try SecurityObject(json: json) } catch { throw .badRequest(error.reason) }
            do { try c.db.setSecurity(json) } catch { throw RESTError(error) }
            return .ok()
        }
        do { return .json(200, try c.db.security ?? SecurityObject.defaultJSON) } catch { throw RESTError(error) }
    }
}
