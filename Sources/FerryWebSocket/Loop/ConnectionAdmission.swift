import FerryNet
import Logging
import Synchronization

/// Admits or refuses new connections: at most `maxConnections` in all and
/// `maxConnectionsPerAddress` from one client address (the host, without the port), so one
/// neighbour opening thousands of connections leaves room for everyone else. Refusals are
/// logged at most once per ten seconds per kind, not once per connection.
final class ConnectionAdmission: Sendable {
    /// Why a connection was refused.
    enum Refusal: String, Error { case total = "connection limit reached", perAddress = "per-address connection limit reached" }

    private struct State {
        var open = 0
        var perAddress: [String: Int] = [:]
        var lastLogged: [String: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    private let maxConnections: Int
    private let maxPerAddress: Int
    private let logger: Logger

    init(maxConnections: Int, maxPerAddress: Int, logger: Logger) {
        self.maxConnections = maxConnections
        self.maxPerAddress = maxPerAddress
        self.logger = logger
    }

    /// Connections admitted and not yet released.
    var openCount: Int { state.withLock { $0.open } }

    /// Admits a connection from `address` and gives the call that releases its slot (call it
    /// exactly once, when the connection ends), or the reason it is refused.
    func admit(_ address: SocketAddress?) -> Result<@Sendable () -> Void, Refusal> {
        let key = address?.host ?? ""
        let refusal: Refusal? = state.withLock { s in
            if s.open >= maxConnections { return .total }
            if s.perAddress[key, default: 0] >= maxPerAddress { return .perAddress }
            s.open += 1
            s.perAddress[key, default: 0] += 1
            return nil
        }
        guard let refusal else {
            return .success { [self] in
                state.withLock { s in
                    s.open -= 1
                    let left = s.perAddress[key, default: 1] - 1
                    s.perAddress[key] = left > 0 ? left : nil
                }
            }
        }
        let now = ContinuousClock.now
        let due = state.withLock { s -> Bool in
            if let last = s.lastLogged[refusal.rawValue], now - last < .seconds(10) { return false }
            s.lastLogged[refusal.rawValue] = now
            return true
        }
        if due {
            logger.warning("\(refusal.rawValue): refusing new connections with 503",
                           metadata: ["address": "\(key)", "limit": "\(refusal == .total ? maxConnections : maxPerAddress)"])
        }
        return .failure(refusal)
    }
}
