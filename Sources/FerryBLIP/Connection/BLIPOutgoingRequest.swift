import Synchronization

/// A request being sent with a streamed body (`BLIPConnection.startRequest`): write the body
/// through `body`, then take the response whole (`response()`) or as a stream
/// (`responseStream()`).
///
/// Promises: the response is kept from the moment its properties arrive until asked for, so
/// it may be asked for before, during or after writing (a peer that streams its reply while
/// the request is still arriving needs the reader to run alongside the writer). An ERR reply
/// throws `.errorResponse`; a NoReply request completes at once with an empty response.
public final class BLIPOutgoingRequest: Sendable {
    /// The request's body: `write`, then `finish`.
    public let body: BLIPBodyWriter
    let slot = ResponseSlot()
    private let maxResponseSize: Int

    init(connection: BLIPConnection, maxResponseSize: Int) {
        body = BLIPBodyWriter(connection: connection)
        self.maxResponseSize = maxResponseSize
    }

    /// Waits for the response and its whole body (at most `BLIPConfiguration.maxMessageSize`).
    public func response() async throws(BLIPError) -> BLIPMessage {
        let stream = try await responseStream()
        var message = stream.head
        message.body = try await stream.body.collect(upTo: maxResponseSize)
        return message
    }

    /// Waits for the response's properties; its body follows as a stream. One reader.
    public func responseStream() async throws(BLIPError) -> BLIPIncomingStream {
        try await slot.wait().get()
    }

    /// Where the loop leaves the response for whichever task asks for it, before or after.
    final class ResponseSlot: Sendable {
        private let state = Mutex<(result: Result<BLIPIncomingStream, BLIPError>?,
                                   waiters: [CheckedContinuation<Result<BLIPIncomingStream, BLIPError>, Never>])>((nil, []))

        /// Records the outcome (the first one wins) and wakes the waiters.
        func fulfil(_ result: Result<BLIPIncomingStream, BLIPError>) {
            let waiters = state.withLock { s -> [CheckedContinuation<Result<BLIPIncomingStream, BLIPError>, Never>] in
                guard s.result == nil else { return [] }
                s.result = result
                defer { s.waiters = [] }
                return s.waiters
            }
            for w in waiters { w.resume(returning: result) }
        }

        func wait() async -> Result<BLIPIncomingStream, BLIPError> {
            await withCheckedContinuation { c in
                let ready = state.withLock { s -> Result<BLIPIncomingStream, BLIPError>? in
                    if let r = s.result { return r }
                    s.waiters.append(c)
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        }
    }
}
