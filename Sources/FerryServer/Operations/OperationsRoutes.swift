import FerryStore
import FerrySync

/// The operator's routes, answered by a router hook before the REST API's own: `GET /_up`
/// (public, for load balancers and orchestrators: is the process serving, which databases,
/// how its replications are doing) and `GET /_metrics` (Prometheus; server admins only, since
/// database names and peer URLs are not everyone's business).
enum OperationsRoutes {
    /// The hook for a router.
    static func hook(metrics: DaemonMetrics, sources: DaemonMetrics.Sources) -> @Sendable (RESTRequest, RESTRouter) async -> RESTResponse? {
        { request, router in
            guard request.segments.count == 1 else { return nil }
            switch request.segments[0] {
            case "_up": return answer(request) { up(sources) }
            case "_metrics":
                guard request.method == "GET" || request.method == "HEAD" else { return RESTError.methodNotAllowed("GET,HEAD").response }
                let identity: AccessControl.Identity
                do throws(RESTError) { identity = try await router.identify(request) } catch { return error.response }
                return answer(request) {
                    guard router.access.isServerAdmin(identity) else { return RESTError.forbidden("You are not a server admin.").response }
                    return RESTResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                                        body: .bytes(metrics.render(sources)))
                }
            default: return nil
            }
        }
    }

    private static func answer(_ request: RESTRequest, _ body: () -> RESTResponse) -> RESTResponse {
        guard request.method == "GET" || request.method == "HEAD" else { return RESTError.methodNotAllowed("GET,HEAD").response }
        return body()
    }

    /// CouchDB's `/_up` (`{"status":"ok","seeds":{}}`: Ferry has no cluster seeds) with the
    /// databases and the daemon's own replications.
    static func up(_ sources: DaemonMetrics.Sources) -> RESTResponse {
        var databases: [String: JSONValue] = [:]
        for name in sources.registry.names {
            databases[name] = .object(["status": sources.registry.database(name) == nil ? "offline" : "online"])
        }
        let replications: [JSONValue] = sources.replications.snapshots.map { s in
            var o: [String: JSONValue] = ["target": .string(s.target), "database": .string(s.database), "state": .string(s.state.rawValue),
                                          "docs_pushed": .int(Int64(s.documentsPushed)), "docs_pulled": .int(Int64(s.documentsPulled))]
            if let e = s.lastError { o["last_error"] = .string(e) }
            return .object(o)
        }
        return .json(200, .object(["status": "ok", "seeds": .object([:]), "databases": .object(databases),
                                   "replications": .array(replications)]))
    }
}
