/// The body of an incoming streamed BLIP message, as chunks in order (each at most 64 KiB,
/// except a body that arrived whole in one frame, which is one chunk). Iteration ends at the
/// message's last frame and throws a `BLIPError` if the connection closes or fails first.
///
/// Promises: at most about `BLIPConfiguration.streamWindow` bytes plus one flow-control window
/// wait for the reader; while the reader is behind, the message's ACKs are withheld so its
/// sender stops (other messages on the connection keep flowing). One reader: iterate it once,
/// from one task. Dropping every copy of the stream unread discards the rest of the body (its
/// ACKs then flow again, so the sender is not left frozen).
public struct BLIPBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = BLIPError
    let reader: Reader

    init(connection: BLIPConnection, body: IncomingBody) {
        reader = Reader(connection: connection, body: body)
    }

    /// Reads the chunks in turn.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = [UInt8]
        public typealias Failure = BLIPError
        let reader: Reader

        /// The next chunk; nil at the end of the body.
        public mutating func next() async throws(BLIPError) -> [UInt8]? { try await reader.next() }

        /// The next chunk; nil at the end of the body.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(BLIPError) -> [UInt8]? {
            try await reader.next()
        }
    }

    /// An iterator over the (remaining) body.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: reader) }

    /// The rest of the body as one array; throws `.invalidRequest` if it exceeds `limit`
    /// bytes (for bodies known to be small; the point of streaming is not to do this).
    public func collect(upTo limit: Int) async throws(BLIPError) -> [UInt8] {
        var out: [UInt8] = []
        while let chunk = try await reader.next() {
            guard out.count + chunk.count <= limit else { throw .invalidRequest("body exceeds \(limit) bytes") }
            if out.isEmpty { out = chunk } else { out.append(contentsOf: chunk) }
        }
        return out
    }

    /// Ties the body to its reader's lifetime: when the last copy of the stream goes, the
    /// connection stops buffering the rest.
    final class Reader: Sendable {
        let connection: BLIPConnection
        let body: IncomingBody

        init(connection: BLIPConnection, body: IncomingBody) {
            self.connection = connection
            self.body = body
        }

        deinit {
            let body = self.body
            connection.onLoop { conn in conn.discardBody(body) }
        }

        func next() async throws(BLIPError) -> [UInt8]? {
            let body = self.body
            let r: Result<[UInt8]?, BLIPError> = await withCheckedContinuation { c in
                connection.onLoop { conn in conn.nextChunk(of: body) { c.resume(returning: $0) } }
            }
            return try r.get()
        }
    }
}

/// An incoming BLIP message whose body arrives as a stream: its properties as soon as they
/// have arrived, then the body chunk by chunk.
public struct BLIPIncomingStream: Sendable {
    /// The message's type, number, flags and properties; its `body` is empty (see `body`).
    public let head: BLIPMessage
    /// The body.
    public let body: BLIPBodyStream

    /// The properties.
    public var properties: BLIPProperties { head.properties }
}
