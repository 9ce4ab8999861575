import Logging

/// One line per answered request at `info` (label `ferry.request`), as CouchDB's request log
/// writes one at `notice`: client address, user, method, target, status, bytes of body sent
/// and duration. A refused request (401, 403, 429, 413, 408) leaves its line too, which is
/// how an operator sees why a client fails. Credentials never appear: they travel in header
/// fields, which are not logged, and the user is the name they proved.
struct AccessLog: Sendable {
    let logger: Logger

    /// The label the lines go under.
    static let label = "ferry.request"

    init(logger: Logger = Logger(label: AccessLog.label)) { self.logger = logger }

    /// Whether lines are written at all (the level is `info` or below): the line is only
    /// built then.
    var isEnabled: Bool { logger.logLevel <= .info }

    /// Writes the line of one answered request.
    func record(method: String, target: String, status: Int, bytes: Int, since start: ContinuousClock.Instant,
                user: String?, address: String) {
        guard isEnabled else { return }
        let elapsed = ContinuousClock.now - start
        let ms = elapsed.seconds * 1000
        // Values as they are (no interpolation): this runs once per request.
        logger.info("\(method) \(target) \(status)", metadata: [
            "peer": .string(address),
            "user": .string(user ?? "-"),
            "bytes": .stringConvertible(bytes),
            "ms": .stringConvertible((ms * 10).rounded() / 10),
        ])
    }
}
