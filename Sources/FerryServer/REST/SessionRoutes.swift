import FerryHTTP
import FerryStore

/// `/_session` (Protocol/rest.md, "Sessions"): CouchDB's cookie login, which CouchDB's own
/// replicator (given `http://user:password@host/db`) and most client libraries use before
/// anything else. `POST` checks a name and password (form or JSON body) and sets the
/// `AuthSession` cookie; `GET` says who the request is; `DELETE` clears the cookie.
extension RESTRouter {
    func session(_ r: RESTRequest) async throws(RESTError) -> RESTResponse {
        switch r.method {
        case "GET", "HEAD": return try await currentSession(r)
        case "POST": return try await login(r)
        case "DELETE":
            if let next = r[query: "next"], !next.hasPrefix("/") { throw .badRequest("path must begin with a /.") }
            let clear = SessionCookie.setCookie("", now: AccessControl.now(), timeout: Int64(access.policy.sessionTimeout), secure: r.isSecure,
                                                sameSite: access.policy.cookieSameSite)
            return redirected(r, .json(200, Array(#"{"ok":true}"#.utf8), headers: [("Set-Cookie", clear)]))
        default:
            throw .methodNotAllowed("GET,HEAD,POST,DELETE")
        }
    }

    /// `GET /_session`: the user context and how it was authenticated. Without credentials it
    /// answers the anonymous context (name null) even where anonymous access is off, as
    /// CouchDB does: it tells nothing, and a client asks it to learn whether to log in.
    private func currentSession(_ r: RESTRequest) async throws(RESTError) -> RESTResponse {
        let authentication: AccessControl.Authentication
        switch await access.authenticate(authorization: r.header("Authorization"), cookie: r.header("Cookie"), certificate: r.peerCertificate,
                                        address: r.remoteAddress?.host) {
        case .success(let a): authentication = a
        case .failure(let e) where e.status == 401 && r.header("Authorization") == nil:
            authentication = AccessControl.Authentication(identity: .anonymous, method: nil)
        case .failure(let e):
            return Self.withoutChallenge(e.response)
        }
        var info: [String: JSONValue] = ["authentication_handlers": ["cookie", "default"]]
        if let method = authentication.method { info["authenticated"] = .string(method) }
        return .json(200, .object(["ok": true, "userCtx": userContext(authentication.identity), "info": .object(info)]))
    }

    /// `POST /_session`: `name` and `password` from a form or a JSON object; 200 with the
    /// cookie, 401 (and the cookie cleared) for a wrong pair, 415 for another body type.
    private func login(_ r: RESTRequest) async throws(RESTError) -> RESTResponse {
        let type = r.header("Content-Type")?.lowercased() ?? ""
        var name: String?, password: String?
        if type.hasPrefix("application/x-www-form-urlencoded") {
            for pair in try r.decodedBody().split(separator: UInt8(ascii: "&")) {
                let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
                guard let key = PercentEncoding.decode(Substring(decoding: parts[0], as: UTF8.self), plusIsSpace: true) else { continue }
                let value = PercentEncoding.decode(Substring(decoding: parts.count > 1 ? parts[1] : [], as: UTF8.self), plusIsSpace: true)
                if key == "name" { name = value } else if key == "password" { password = value }
            }
        } else if type.hasPrefix("application/json") {
            let o = try Self.jsonObject(r)
            name = o["name"]?.stringValue
            password = o["password"]?.stringValue
        } else {
            throw .badContentType("Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'")
        }
        let timeout = Int64(access.policy.sessionTimeout)
        let now = AccessControl.now()
        let refused = SessionCookie.setCookie("", now: now, timeout: timeout, secure: r.isSecure, sameSite: access.policy.cookieSameSite)
        // No name at all is a malformed login, as CouchDB answers it; a wrong pair is 401.
        guard name != nil else { throw .badRequest("request body must contain a username") }
        guard let name, let password else {
            var e = Self.withoutChallenge(RESTError.unauthorized().response)
            e.headers.append(("Set-Cookie", refused))
            return e
        }
        switch await access.checkPassword(name: name, password: password, address: r.remoteAddress?.host) {
        case .failure(let error):
            var e = Self.withoutChallenge(error.response)
            if error.status == 401 { e.headers.append(("Set-Cookie", refused)) }
            return e
        case .success(let user):
            guard let value = access.issueCookie(for: user, now: now) else { throw .unauthorized() }
            let context = userContext(.user(user))
            let body: JSONValue = .object(["ok": true, "name": .string(user), "roles": context.objectValue?["roles"] ?? .array([])])
            let cookie = SessionCookie.setCookie(value, now: now, timeout: timeout, secure: r.isSecure, sameSite: access.policy.cookieSameSite)
            return redirected(r, .json(200, body, headers: [("Set-Cookie", cookie)]))
        }
    }

    /// A 401 without `WWW-Authenticate`, as CouchDB answers `/_session`: a browser's script
    /// that logs in must not get the browser's own password prompt instead.
    static func withoutChallenge(_ response: RESTResponse) -> RESTResponse {
        var r = response
        r.headers.removeAll { $0.name == "WWW-Authenticate" }
        return r
    }

    /// `{"name":…,"roles":[…]}`: `_admin` for a server admin (CouchDB's role of the same power).
    private func userContext(_ identity: AccessControl.Identity) -> JSONValue {
        var roles: [JSONValue] = []
        // The user's CouchDB roles (their `_users` document's), then `_admin`, as CouchDB lists them.
        if case .user(let n) = identity { roles += (access.users[n]?.groups ?? []).map { .string($0) } }
        if access.isServerAdmin(identity) { roles.append("_admin") }
        let name: JSONValue = { if case .user(let n) = identity { return .string(n) } else { return .null } }()
        return .object(["name": name, "roles": .array(roles)])
    }

    /// With `?next=/path`, a 302 to that path on this server (same body), as CouchDB answers a
    /// browser's login form. Only a path on this host is followed: `next=//evil` or a full URL
    /// would make the server an open redirect.
    private func redirected(_ r: RESTRequest, _ response: RESTResponse) -> RESTResponse {
        guard let next = r[query: "next"], next.hasPrefix("/"), !next.hasPrefix("//"), !next.contains("\\"),
              let host = r.header("Host") else { return response }
        var out = response
        out.status = 302
        out.headers.append(("Location", "\(r.isSecure ? "https" : "http")://\(host)\(next)"))
        return out
    }
}
