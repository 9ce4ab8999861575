import FerryNet
import FerryWebSocket
import Logging

extension BLIPConnection {
    /// For a server with its own upgrade hook (its own paths, authentication, several apps):
    /// accepts `request` as a BLIP connection for `app` on `loop` and returns the decision for
    /// the hook to return. `onOpen` runs on the loop once the WebSocket is open (register
    /// handlers there). A request that does not offer `BLIP_3+<app>` is refused with 400.
    public static func accept(_ request: UpgradeRequest, on loop: EventLoop, app: String,
                              configuration: BLIPConfiguration = BLIPConfiguration(),
                              logger: Logger = Logger(label: "ferry.blip"),
                              onOpen: @escaping @Sendable (BLIPConnection) -> Void) -> UpgradeDecision {
        let token = subprotocol(app: app)
        guard request.offeredSubprotocols.contains(token) else {
            return .refuse(status: 400, message: "this endpoint speaks \(token) only")
        }
        let conn = BLIPConnection(loop: loop, configuration: configuration, logger: logger)
        conn.openWaiter = { result in if case .success = result { onOpen(conn) } }
        return .accept(subprotocol: token, handler: conn)
    }
}
