/// Writes the body of one streamed BLIP message (a request from
/// `BLIPConnection.startRequest`, or a response from `BLIPIncomingRequest.respondStreaming`)
/// piece by piece, so a body of any size is never held whole.
///
/// Promises: bytes go out in order, in 16 KiB frames, as soon as flow control and the socket
/// allow; every frame has MoreComing until `finish()`, so the peer never sees a truncated body
/// as complete. `write` suspends while more than `BLIPConfiguration.streamWindow` bytes are
/// written and not yet framed, which bounds the sender's memory. One producer at a time: do
/// not call `write` again before the previous call returned. A writer dropped (or `abort`ed)
/// before `finish()` closes the connection with 1011 (`BLIPError.aborted`), because BLIP 3
/// has no way to cancel one message.
public final class BLIPBodyWriter: Sendable {
    let connection: BLIPConnection
    let state = State()

    init(connection: BLIPConnection) {
        self.connection = connection
    }

    deinit {
        let state = self.state
        connection.onLoop { conn in
            if !state.finished && state.failure == nil { conn.abortStream(state, reason: "writer dropped before finish()") }
        }
    }

    /// Appends `bytes` to the body (the array is kept as is until framed, not copied). Returns
    /// once the unframed backlog is within the window. Throws if the connection closed, the
    /// body was already finished, or the message could not be started (e.g. a response that
    /// is not owed).
    public func write(_ bytes: [UInt8]) async throws(BLIPError) {
        let state = self.state
        let r: Result<Void, BLIPError> = await withCheckedContinuation { c in
            connection.onLoop { conn in conn.streamWrite(bytes, state) { c.resume(returning: $0) } }
        }
        try r.get()
    }

    /// Ends the body: the rest goes out and the last frame has no MoreComing. Returns once
    /// that is queued, not when it is sent. Finishing twice is harmless.
    public func finish() async throws(BLIPError) {
        let state = self.state
        let r: Result<Void, BLIPError> = await withCheckedContinuation { c in
            connection.onLoop { conn in c.resume(returning: conn.streamFinish(state)) }
        }
        try r.get()
    }

    /// Abandons an unfinished body: the connection closes with 1011 and everything pending on
    /// it fails with `.aborted(reason)`. Does nothing after `finish()`.
    public func abort(reason: String) {
        let state = self.state
        connection.onLoop { conn in conn.abortStream(state, reason: reason) }
    }

    /// What the connection knows of the writer.
    ///
    /// Safety of `@unchecked Sendable`: created anywhere, but its fields are read and written
    /// only on the connection's event loop (every writer call and the deinit hop there).
    final class State: @unchecked Sendable {
        /// The queued message, once the loop has started it.
        var message: OutgoingMessage?
        /// Why it cannot be written (connection closed, response not owed, aborted).
        var failure: BLIPError?
        /// `finish()` was called.
        var finished = false
        /// A `write` waiting for the backlog to drain.
        var waiter: ((Result<Void, BLIPError>) -> Void)?
    }
}
