/// A whole response read by `HTTPClient.execute`: status, fields and the body, decoded from
/// gzip when the server sent it so.
public struct HTTPClientResponse: Sendable {
    /// The head as received.
    public var head: HTTPResponseHead
    /// The body (without content coding).
    public var body: [UInt8]

    /// A response with these parts.
    public init(head: HTTPResponseHead, body: [UInt8]) {
        self.head = head
        self.body = body
    }

    /// The status code.
    public var status: Int { head.status }

    /// The first value of a header field, by case-insensitive name.
    public subscript(name: String) -> String? { head[name] }
}

/// A response whose body arrives as it is read (`HTTPClient.stream`): for feeds such as
/// CouchDB's continuous `_changes`. Ending the iteration early closes the connection.
public struct HTTPClientStream: Sendable {
    /// The head as received.
    public var head: HTTPResponseHead
    /// The body's pieces in order (de-chunked); it throws an `HTTPClientError` if the
    /// connection fails mid-body.
    public var body: AsyncThrowingStream<[UInt8], any Error>
}
