extension RESTRouter {
    /// 403 for a write (any method but GET, HEAD and OPTIONS) that carries a session cookie
    /// and an `Origin` other than this server's own and those CORS allows: a page elsewhere
    /// making a logged-in user's browser write (cross-site request forgery). Browsers send
    /// `Origin` with every such request; requests without a cookie, or without `Origin`
    /// (clients other than browsers), are not affected.
    func crossOriginWriteRefusal(_ request: RESTRequest) -> RESTResponse? {
        switch request.method {
        case "GET", "HEAD", "OPTIONS": return nil
        default: break
        }
        guard let origin = request.header("Origin"), let cookie = request.header("Cookie"),
              cookie.contains(SessionCookie.name + "=") else { return nil }
        if let host = request.header("Host"), origin.caseInsensitiveEquals((request.isSecure ? "https://" : "http://") + host) {
            return nil
        }
        if let cors, cors.allows(origin: origin) { return nil }
        return RESTError.forbidden("A write from \(origin), which is neither this server nor an origin CORS allows, "
            + "with a session cookie: refused.").response
    }
}
