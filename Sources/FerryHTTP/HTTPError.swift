/// A request Ferry's HTTP decoder refuses, with the status to answer it with
/// (Protocol/http.md, "Errors"). After an error the connection is closed: the decoder can no
/// longer tell where the next request starts.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status to answer with: 400 malformed, 413 body too large, 431 head too large,
    /// 501 transfer coding not implemented, 505 HTTP version not supported.
    public let status: Int
    /// What was wrong, for the log and the response body.
    public let reason: String

    /// An error answered with `status`.
    public init(status: Int, reason: String) {
        self.status = status
        self.reason = reason
    }

    static func malformed(_ reason: String) -> HTTPError { HTTPError(status: 400, reason: reason) }

    public var description: String { "HTTP \(status): \(reason)" }
}
