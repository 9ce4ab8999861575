import FerryHTTP
import FerryStore

/// An answer to a `RESTRequest`: a status, header fields, and a body that is either whole
/// (sent with `Content-Length`) or a stream of pieces (sent chunked, for `_changes` feeds).
public struct RESTResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields (never `Content-Length` or `Transfer-Encoding`: the connection writes them).
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: Body
    /// A feed (`_changes` longpoll with heartbeats, continuous, eventsource): its stream is
    /// ended as soon as the client closes its sending side, where any other answer is still
    /// written to a client that half-closed.
    public var isFeed = false
    /// The user the request proved to be (the access log's), set by the router.
    public var user: String?

    /// A response body.
    public enum Body: Sendable {
        /// All of it, now.
        case bytes([UInt8])
        /// Pieces as they come; the response ends when the stream finishes. The connection
        /// cancels the producer (by dropping the stream) when the client goes away.
        case stream(AsyncStream<[UInt8]>)
    }

    /// A response with these parts.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response of bytes already encoded.
    public static func json(_ status: Int, _ bytes: [UInt8], headers: [(name: String, value: String)] = []) -> RESTResponse {
        RESTResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: .bytes(bytes))
    }

    /// A JSON response of a value.
    public static func json(_ status: Int, _ value: JSONValue, headers: [(name: String, value: String)] = []) -> RESTResponse {
        json(status, CanonicalJSON.encode(value), headers: headers)
    }

    /// `{"ok":true}` with `status`.
    public static func ok(_ status: Int = 200) -> RESTResponse { json(status, Array(#"{"ok":true}"#.utf8)) }
}
