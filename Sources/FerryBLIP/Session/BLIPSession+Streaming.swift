extension BLIPSession {
    /// Queues a request whose body is written piece by piece (`append`, then `finish`);
    /// `request.body`, if any, is its start. Numbered like any request. Until `finish`, every
    /// frame of it has MoreComing, and it leaves the queue whenever it has nothing to frame.
    func sendStreamed(request: BLIPMessage) -> OutgoingMessage {
        let (number, flags) = numberRequest(request)
        let m = OutgoingMessage(streaming: .request, number: number, flags: flags, message: request)
        enqueue(m)
        return m
    }

    /// Queues a response to request `number` whose body is written piece by piece. Throws like
    /// `send(response:to:)`.
    func sendStreamed(response: BLIPMessage, to number: UInt64) throws(BLIPError) -> OutgoingMessage {
        let (type, flags) = try claimResponse(response, to: number)
        let m = OutgoingMessage(streaming: type, number: number, flags: flags, message: response)
        enqueue(m)
        return m
    }

    /// Adds bytes to a streamed message's body (ignored once it is finished).
    func append(_ bytes: [UInt8], to m: OutgoingMessage) {
        m.appendStreamed(bytes)
        requeueIfReady(m)
    }

    /// Ends a streamed message's body: its last frame goes out without MoreComing.
    func finish(_ m: OutgoingMessage) {
        m.finishStream()
        requeueIfReady(m)
    }

    /// A message out of the queue only for want of bytes goes back in once it has some.
    private func requeueIfReady(_ m: OutgoingMessage) {
        guard m.starved, m.hasFrameReady else { return }
        m.starved = false
        if !m.frozen { enqueue(m) }
    }
}
