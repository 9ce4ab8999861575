import FerryStore

/// The web console at `/_utils/` (CouchDB's path for Fauxton): its files, under a strict
/// Content-Security-Policy (no inline script or style, nothing from elsewhere), and three
/// answers the CouchDB API does not give: `access` (who is logged in and their role on each
/// database, so a reader is shown no edit controls; the routes refuse the edits all the same),
/// `attachments/DB/DOC` (which attachments' bytes are here) and `users` (per-database roles).
/// Everything else the console does goes through the REST API with the session cookie, as
/// any client's requests.
enum ConsoleRoutes {
    /// Only this server's own files and requests; no inline code, no frames, no plugins.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    /// The router hook answering `/_utils` and below; nil for any other path.
    static func hook() -> @Sendable (RESTRequest, RESTRouter) async -> RESTResponse? {
        { request, router in
            let s = request.segments
            guard s.first == "_utils" else { return nil }
            guard request.method == "GET" || request.method == "HEAD" else { return RESTError.methodNotAllowed("GET,HEAD").response }
            let path = request.head.target.split(separator: "?", maxSplits: 1).first ?? ""
            if s.count == 1, !path.hasSuffix("/") {
                // CouchDB's redirect: relative module paths resolve under the folder.
                return RESTResponse(status: 301, headers: [("Location", "/_utils/")])
            }
            let name = s.count == 1 ? "index.html" : s[1...].joined(separator: "/")
            if name == "access" { return await access(request, router) }
            if name == "users" { return await databaseRoles(request, router) }
            if s.count >= 4, s[1] == "attachments" { return await fetchedAttachments(request, router, db: s[2], id: s[3...].joined(separator: "/")) }
            guard let asset = ConsoleAsset.byName[name] else { return RESTError.notFound("missing").response }
            var headers = securityHeaders
            headers += [("ETag", asset.etag), ("Cache-Control", "no-cache")]
            if request.header("If-None-Match") == asset.etag { return RESTResponse(status: 304, headers: headers) }
            return RESTResponse(status: 200, headers: [("Content-Type", asset.contentType)] + headers, body: .bytes(asset.bytes))
        }
    }

    static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
    ]

    /// `GET /_utils/attachments/DB/DOCID`: `{NAME: true|false}`, whether each attachment's
    /// bytes are on this server (a replica may not have fetched them: Ferry's download rules).
    /// The REST API does not say so (CouchDB has no such state); readers of DB may ask.
    static func fetchedAttachments(_ request: RESTRequest, _ router: RESTRouter, db name: String, id: String) async -> RESTResponse {
        do throws(RESTError) {
            let identity = try await router.identify(request)
            guard let db = router.registry.database(name) else { throw .notFound("Database does not exist.") }
            guard router.access.role(of: identity, on: name) != nil else { throw .forbidden("You are not allowed to access this db.") }
            let doc: Document?
            do { doc = try db.document(id) } catch { throw RESTError(error) }
            guard let doc else { throw .notFound("missing") }
            let attachments: [Attachment]
            do { attachments = try db.attachments(of: doc) } catch { throw RESTError(error) }
            return .json(200, .object(Dictionary(uniqueKeysWithValues: attachments.map { ($0.name, JSONValue.bool($0.isFetched)) })),
                         headers: [("Cache-Control", "no-store")])
        } catch {
            return error.response
        }
    }

    /// `GET /_utils/users` (server admins): `{NAME: {DB: ROLE}}`, each user's per-database Ferry
    /// roles from the users file (`ferry user add --role`), which `/_users` documents leave out.
    static func databaseRoles(_ request: RESTRequest, _ router: RESTRouter) async -> RESTResponse {
        do throws(RESTError) {
            let identity = try await router.identify(request)
            guard router.access.isServerAdmin(identity) else { throw .forbidden("You are not a server admin.") }
            let users = router.access.users.mapValues { u in JSONValue.object(u.roles.mapValues { .string($0.description) }) }
            return .json(200, .object(users), headers: [("Cache-Control", "no-store")])
        } catch {
            return error.response
        }
    }

    /// `GET /_utils/access`: `{"authenticated": true, "name", "serverAdmin", "databases":
    /// {name: role}}` for the requester; `{"authenticated": false}` (200: the console's first
    /// question, which a browser would log as an error if it were a 401) without valid
    /// credentials when anonymous access is off.
    static func access(_ request: RESTRequest, _ router: RESTRouter) async -> RESTResponse {
        let identity: AccessControl.Identity
        do throws(RESTError) { identity = try await router.identify(request) } catch {
            guard error.status == 401 else { return error.response }
            return .json(200, .object(["authenticated": false]), headers: [("Cache-Control", "no-store")])
        }
        var databases: [String: JSONValue] = [:]
        for name in router.registry.names {
            if let role = router.access.role(of: identity, on: name) { databases[name] = .string(role.description) }
        }
        let name: JSONValue
        switch identity {
        case .user(let n): name = .string(n)
        case .anonymous: name = .null
        case .localAdmin: name = "(local admin)"
        }
        return .json(200, .object(["authenticated": true, "name": name, "serverAdmin": .bool(router.access.isServerAdmin(identity)),
                                   "databases": .object(databases)]), headers: [("Cache-Control", "no-store")])
    }
}
