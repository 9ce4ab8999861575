/// Decodes the requests an HTTP/1.x client sends on one connection (Protocol/http.md,
/// "Requests"): bytes in, events out — a head, the body in pieces as they arrive, the end —
/// for any number of pipelined requests. Sans-I/O: it never reads or writes a socket.
///
/// Every limit in `HTTPLimits` is enforced before bytes are buffered past it. A request that
/// breaks the protocol throws an `HTTPError` naming the status to answer with; the decoder then
/// stays failed (the connection must be closed: where the next request starts is unknown).
/// Framing follows RFC 9112 §6 strictly, so a request cannot be read two ways: a request with
/// both `Transfer-Encoding` and `Content-Length`, or with differing `Content-Length` values, is
/// refused.
public struct HTTPRequestDecoder: Sendable {
    /// What the decoder read.
    public enum Event: Sendable, Equatable {
        /// A request's head. Its body, if any, follows.
        case head(HTTPRequestHead)
        /// The next piece of the current request's body (de-chunked).
        case body([UInt8])
        /// The current request is complete; the next event, if any, is the next request's head.
        case end
    }

    /// The limits in force.
    public let limits: HTTPLimits
    private var reader: HTTPMessageReader
    private var failed = false
    /// After a request asking to switch protocols (`Upgrade` with `Connection: upgrade`, no
    /// body): the bytes after it may be another protocol's, so they wait, unparsed, for the
    /// caller's `takeUnread` (upgrade accepted) or `declineUpgrade` (it goes on as HTTP).
    public private(set) var awaitsUpgradeDecision = false

    /// A decoder with these limits.
    public init(limits: HTTPLimits = HTTPLimits()) {
        self.limits = limits
        reader = HTTPMessageReader(limits: limits, noun: "request")
    }

    /// Whether the decoder is between requests with nothing buffered (a connection may be
    /// closed for idleness only then).
    public var isIdle: Bool { !failed && !awaitsUpgradeDecision && reader.isIdle }

    /// The upgrade was accepted: the bytes after the upgrade request, which belong to the new
    /// protocol. The decoder reads nothing more.
    public mutating func takeUnread() -> [UInt8] {
        failed = true
        awaitsUpgradeDecision = false
        return reader.takeUnread()
    }

    /// The upgrade was declined (RFC 9110 §7.8 lets a server ignore `Upgrade`): the connection
    /// goes on as HTTP, and the requests already buffered after it are decoded now.
    public mutating func declineUpgrade() throws(HTTPError) -> [Event] {
        awaitsUpgradeDecision = false
        return try feed([UInt8]())
    }

    /// Takes the next bytes from the connection; returns the events they complete.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(HTTPError) -> [Event] {
        guard !failed else { throw HTTPError.malformed("the connection already failed") }
        reader.append(bytes)
        var events: [Event] = []
        guard !awaitsUpgradeDecision else { return events }
        do throws(HTTPError) {
            while !awaitsUpgradeDecision, try step(&events) {}
        } catch {
            failed = true
            reader.reset()
            throw error
        }
        reader.compact()
        return events
    }

    /// Advances by one step; false when more bytes are needed.
    private mutating func step(_ events: inout [Event]) throws(HTTPError) -> Bool {
        if reader.awaitsHead {
            guard let bytes = try reader.nextHead() else { return false }
            let head = try HTTPHeadReader.parse(bytes, limits: limits)
            events.append(.head(head))
            let framing: HTTPMessageReader.Framing
            switch head.body {
            case .none: framing = .none
            case .length(let n): framing = .length(n)
            case .chunked: framing = .chunked
            }
            reader.beginBody(framing)
            if !HTTPMessageReader.hasBody(framing) {
                events.append(.end)
                if head["Upgrade"] != nil, head.tokens("Connection").contains(where: { $0.caseInsensitiveEquals("upgrade") }) {
                    awaitsUpgradeDecision = true
                }
            }
            return true
        }
        switch try reader.stepBody() {
        case .needMore: return false
        case .piece(let bytes):
            events.append(.body(bytes))
            if reader.awaitsHead { events.append(.end) }
            return true
        case .progressed: return true
        case .end:
            events.append(.end)
            return true
        }
    }
}
