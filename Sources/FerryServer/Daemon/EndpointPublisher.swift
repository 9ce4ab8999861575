import FoundationEssentials
import Logging

/// Writes the daemon's endpoint file (`DaemonEndpoint.publish`) and, while the file system
/// refuses it (a full disk after a restart), keeps trying in the background. The daemon serves
/// meanwhile — reads, replication out of it, writes once space is back — instead of refusing
/// to start over a file only the `ferry` command reads; `ferry` commands find it once written.
final class EndpointPublisher: Sendable {
    /// The wait between attempts after a refusal.
    static let retryInterval: Duration = .seconds(2)

    private let retry: Task<Void, Never>?

    /// Writes the file now; on failure logs why and starts retrying.
    init(_ endpoint: DaemonEndpoint, under lock: DaemonEndpoint.Lock, logger: Logger) {
        do throws(DaemonEndpoint.Failure) {
            try endpoint.publish(under: lock)
            retry = nil
        } catch {
            logger.error("cannot write the endpoint file; serving anyway, and `ferry` commands will find this daemon once it is written (retrying)",
                         metadata: ["error": "\(error)"])
            retry = Task {
                // The sleep throws once `stop` cancels, which ends the loop.
                while (try? await Task.sleep(for: Self.retryInterval)) != nil {
                    if (try? endpoint.publish(under: lock)) != nil {
                        logger.notice("endpoint file written; `ferry` commands find this daemon")
                        return
                    }
                }
            }
        }
    }

    /// Stops retrying; returns once no attempt is under way, so the lock can be released
    /// without a late write leaving an endpoint file behind.
    func stop() async {
        retry?.cancel()
        await retry?.value
    }
}
