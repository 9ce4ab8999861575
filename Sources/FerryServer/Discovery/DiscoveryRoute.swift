import FerryStore

/// `GET /_discovery` (Protocol/rest.md, "Discovery"), for server admins: what this daemon
/// advertises and every peer it knows — discovered or static, trusted or not and why, and the
/// databases it replicates with each. 404 when the daemon has no peers configured.
enum DiscoveryRoute {
    /// The hook for a router; `coordinator` gives the daemon's coordinator once it exists.
    static func hook(_ coordinator: @escaping @Sendable () -> PeerCoordinator?) -> @Sendable (RESTRequest, RESTRouter) async -> RESTResponse? {
        { request, router in
            guard request.segments.first == "_discovery" else { return nil }
            do {
                return try await route(request, router, coordinator())
            } catch {
                return RESTError.from(error).response
            }
        }
    }

    @inline(never)
    private static func route(_ request: RESTRequest, _ router: RESTRouter, _ coordinator: PeerCoordinator?) async throws(RESTError) -> RESTResponse {
        let identity = try await router.identify(request)
        guard router.access.isServerAdmin(identity) else { throw RESTError.forbidden("You are not a server admin.") }
        try RESTRouter.allow(request, ["GET", "HEAD"])
        guard request.segments.count == 1 else { throw RESTError.notFound("missing") }
        guard let coordinator else { throw RESTError.notFound("this daemon neither advertises nor has peers (see ferry serve --discover, --peer)") }
        return .json(200, await coordinator.snapshot())
    }
}
