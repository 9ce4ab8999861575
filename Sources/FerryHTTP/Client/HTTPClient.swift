import FerryNet
import FoundationEssentials
import Synchronization

/// Ferry's one HTTP/1.1 client (Protocol/http.md, "Client"): kept-alive connections pooled
/// per endpoint, chunked and fixed-length bodies, gzip responses, timeouts, `Expect:
/// 100-continue` (a request that carries it sends its body once the server agrees), redirects followed
/// for `GET`/`HEAD` as CouchDB's replicator does, and TLS through FerryNet with the same trust
/// options (`TLSClientConfiguration`: system store, CA file, pins, client certificate) as
/// `wss://`.
///
/// ```swift
/// let client = HTTPClient()
/// let r = try await client.execute(try HTTPClientRequest(method: "GET", url: "http://127.0.0.1:5984/"))
/// print(r.status, String(decoding: r.body, as: UTF8.self))
/// ```
///
/// Thread-safe. A request whose kept-alive connection turns out closed by the server before it
/// answered is sent once more on a new connection; nothing else is retried here (retries with
/// backoff are the caller's policy).
public final class HTTPClient: Sendable {
    /// Settings of a client, as a value.
    public struct Configuration: Sendable {
        /// How `https` servers are verified, and the client certificate for mutual TLS.
        public var tls = TLSClientConfiguration()
        /// Seconds to establish a TCP connection.
        public var connectTimeout: Double = 10
        /// The longest silence, in seconds, while a response is awaited or read.
        public var readTimeout: Double = 60
        /// Connections open at once to one endpoint; further requests wait for one.
        public var maxConnectionsPerEndpoint = 8
        /// The largest response body `execute` holds (after gzip decoding too).
        public var maxResponseSize = 256 << 20
        /// Head size and field count limits for responses.
        public var limits = HTTPLimits()
        /// Ask for gzip (`Accept-Encoding: gzip`) and decode it in `execute`.
        public var acceptGzip = true
        /// Redirects followed for `GET` and `HEAD` (0: none; the response is returned).
        public var maxRedirects = 5
        /// The `User-Agent` field.
        public var userAgent = "Ferry"

        /// The defaults.
        public init() {}
    }

    /// The configuration it was made with.
    public let configuration: Configuration
    private let group: EventLoopGroup
    private let pool = Mutex(Pool())
    private let tlsContext = Mutex<Result<TLSContext, TLSError>?>(nil)

    /// Idle connections, counts and waiters per endpoint.
    private struct Pool {
        var idle: [HTTPEndpoint: [HTTPClientConnection]] = [:]
        var open: [HTTPEndpoint: Int] = [:]
        var waiters: [HTTPEndpoint: [CheckedContinuation<Void, Never>]] = [:]
    }

    /// A client; its connections run on `eventLoopGroup`.
    public init(configuration: Configuration = Configuration(), eventLoopGroup: EventLoopGroup = .shared) {
        self.configuration = configuration
        group = eventLoopGroup
    }

    deinit {
        let idle = pool.withLock { p in p.idle.values.flatMap { $0 } }
        for c in idle { _ = c.loop?.execute { c.abort() } }
    }

    /// Closes every idle connection (connections in use close when their exchange ends).
    public func closeIdleConnections() {
        let idle = pool.withLock { p -> [HTTPClientConnection] in
            defer { p.idle = [:] }
            return p.idle.values.flatMap { $0 }
        }
        for c in idle { _ = c.loop?.execute { c.abort() } }
    }

    // MARK: Requests

    /// Sends `request` and reads the whole response (any status), gzip decoded. Redirects of
    /// `GET` and `HEAD` are followed up to `maxRedirects`, to the same or another endpoint.
    public func execute(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        var request = request
        var redirects = 0
        while true {
            let response = try await executeOnce(request)
            guard redirects < configuration.maxRedirects, ["GET", "HEAD"].contains(request.method),
                  [301, 302, 303, 307, 308].contains(response.status), let location = response["Location"],
                  let next = Self.resolve(location, against: request) else {
                return response
            }
            redirects += 1
            request.endpoint = next.endpoint
            request.target = next.target
        }
    }

    /// Sends `request` and returns as soon as the response's head is in; the body arrives
    /// through the returned stream, piece by piece, with no size limit (for feeds that run for
    /// hours). No redirect is followed and no content coding is asked for.
    public func stream(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientStream {
        try await withRetryOnStaleConnection(request) { (connection) async throws(HTTPClientError) -> HTTPClientStream in
            let sink = StreamingSink()
            let bytes = encode(request, gzip: false)
            let timeout = request.timeout ?? configuration.readTimeout
            let result: Result<HTTPClientStream, HTTPClientError> = await withTaskCancellationHandler {
                await withCheckedContinuation { c in
                    sink.headContinuation = c
                    sink.connection = connection
                    let accepted = connection.loop?.execute {
                        connection.exchange(bytes, method: request.method, timeout: timeout, maxBodySize: Int.max, sink: sink)
                    } ?? false
                    if !accepted { sink.responseFailed(.transport(.loopShutDown)) }
                }
            } onCancel: {
                _ = connection.loop?.execute { connection.abort(.cancelled) }
            }
            return try result.get()
        }
    }

    private func executeOnce(_ request: HTTPClientRequest) async throws(HTTPClientError) -> HTTPClientResponse {
        let gzip = configuration.acceptGzip && request["Accept-Encoding"] == nil
        let response = try await withRetryOnStaleConnection(request) { (connection) async throws(HTTPClientError) -> HTTPClientResponse in
            let sink = BufferingSink()
            // `Expect: 100-continue` with a body: the head first, the body once the server says so.
            let expects = request.body != nil && request["Expect"]?.caseInsensitiveEquals("100-continue") == true
            let bytes = expects ? encodeHead(request, gzip: gzip) : encode(request, gzip: gzip)
            let held = expects ? request.body : nil
            let timeout = request.timeout ?? configuration.readTimeout
            let limit = configuration.maxResponseSize
            let result: Result<HTTPClientResponse, HTTPClientError> = await withTaskCancellationHandler {
                await withCheckedContinuation { c in
                    sink.continuation = c
                    let accepted = connection.loop?.execute {
                        connection.exchange(bytes, heldBody: held, method: request.method, timeout: timeout, maxBodySize: limit, sink: sink)
                    } ?? false
                    if !accepted { sink.responseFailed(.transport(.loopShutDown)) }
                }
            } onCancel: {
                _ = connection.loop?.execute { connection.abort(.cancelled) }
            }
            return try result.get()
        }
        guard let coding = response["Content-Encoding"]?.lowercased(), coding == "gzip" || coding == "x-gzip" else {
            return response
        }
        do {
            var decoded = response
            decoded.body = try Gzip.decode(response.body, limit: configuration.maxResponseSize)
            return decoded
        } catch {
            switch error {
            case .tooLarge(let limit): throw .badContentEncoding("inflates past \(limit) bytes")
            case .malformed: throw .badContentEncoding("Content-Encoding: gzip, but not complete gzip data")
            }
        }
    }

    /// Runs `body` on a pooled connection; when a reused connection was closed by the server
    /// before answering (its idle timeout raced the request), once more on a new one.
    private func withRetryOnStaleConnection<T>(_ request: HTTPClientRequest,
                                               _ body: (HTTPClientConnection) async throws(HTTPClientError) -> T)
        async throws(HTTPClientError) -> T {
        var fresh = false
        while true {
            let (connection, reused) = try await acquire(request.endpoint, fresh: fresh)
            do throws(HTTPClientError) {
                return try await body(connection)
            } catch {
                guard reused, error == .closedBeforeResponse, !fresh else { throw error }
                fresh = true
            }
        }
    }

    /// The request's bytes, with the fields the client adds.
    private func encode(_ request: HTTPClientRequest, gzip: Bool) -> [UInt8] {
        HTTPRequestEncoder.encode(method: request.method, target: request.target, headers: fields(request, gzip: gzip), body: request.body)
    }

    /// The request's head alone (its body held back for `100 Continue`).
    private func encodeHead(_ request: HTTPClientRequest, gzip: Bool) -> [UInt8] {
        HTTPRequestEncoder.encodeHead(method: request.method, target: request.target, headers: fields(request, gzip: gzip),
                                      bodyLength: request.body?.count)
    }

    /// The request's fields after the ones the client adds.
    private func fields(_ request: HTTPClientRequest, gzip: Bool) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("Host", request.endpoint.hostHeader)]
        if request["User-Agent"] == nil { headers.append(("User-Agent", configuration.userAgent)) }
        if gzip { headers.append(("Accept-Encoding", "gzip")) }
        return headers + request.headers
    }

    /// `location` (absolute, or relative to the request's URL) as an endpoint and target.
    private static func resolve(_ location: String, against request: HTTPClientRequest) -> (endpoint: HTTPEndpoint, target: String)? {
        guard let base = URL(string: request.endpoint.description + request.target),
              let url = URL(string: location, relativeTo: base)?.absoluteURL,
              let (endpoint, target, _, _) = HTTPEndpoint.split(url.absoluteString) else { return nil }
        return (endpoint, target)
    }

    // MARK: Pool

    /// A connection to `endpoint`: an idle one (unless `fresh`), a new one while under the
    /// limit, or the next one released.
    private func acquire(_ endpoint: HTTPEndpoint, fresh: Bool) async throws(HTTPClientError) -> (HTTPClientConnection, reused: Bool) {
        enum Decision { case reuse(HTTPClientConnection), open, wait }
        let limit = max(1, configuration.maxConnectionsPerEndpoint)
        while true {
            if Task.isCancelled { throw .cancelled }
            let decision = pool.withLock { p -> Decision in
                if !fresh, let c = p.idle[endpoint]?.popLast() { return .reuse(c) }
                if p.open[endpoint, default: 0] < limit {
                    p.open[endpoint, default: 0] += 1
                    return .open
                }
                return .wait
            }
            switch decision {
            case .reuse(let c): return (c, true)
            case .open: return (try await open(endpoint), false)
            case .wait:
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let ready = pool.withLock { p -> Bool in
                        if p.idle[endpoint]?.isEmpty == false || p.open[endpoint, default: 0] < limit { return true }
                        p.waiters[endpoint, default: []].append(c)
                        return false
                    }
                    if ready { c.resume() }
                }
            }
        }
    }

    /// Opens a connection (its slot already counted): TCP, then TLS for `https`.
    private func open(_ endpoint: HTTPEndpoint) async throws(HTTPClientError) -> HTTPClientConnection {
        do throws(HTTPClientError) {
            let tls = endpoint.secure ? try context() : nil
            let loop = group.next()
            let tcp: TCPConnection
            do throws(NetError) {
                tcp = try await TCPConnection.connect(host: endpoint.host, port: endpoint.port, on: loop,
                                                      timeout: configuration.connectTimeout)
            } catch { throw .transport(error) }
            let connection = HTTPClientConnection(endpoint: endpoint, limits: configuration.limits)
            let started: Result<Void, NetError> = await withCheckedContinuation { c in
                let accepted = loop.execute { [self] in
                    if let tls {
                        do throws(NetError) { try tcp.startTLS(tls, serverName: endpoint.host) } catch {
                            tcp.abort(nil)
                            c.resume(returning: .failure(error))
                            return
                        }
                    }
                    connection.onReusable = { [weak self] in self?.release($0) }
                    connection.onClosed = { [weak self] in self?.closed($0) }
                    connection.start(tcp)
                    c.resume(returning: .success(()))
                }
                if !accepted { c.resume(returning: .failure(.loopShutDown)) }
            }
            if case .failure(let e) = started { throw .transport(e) }
            return connection
        } catch {
            closed(nil, endpoint: endpoint)
            throw error
        }
    }

    /// The TLS context for `https` endpoints, made once from `configuration.tls`.
    private func context() throws(HTTPClientError) -> TLSContext {
        let result = tlsContext.withLock { cached -> Result<TLSContext, TLSError> in
            if let cached { return cached }
            let made: Result<TLSContext, TLSError>
            do throws(TLSError) { made = .success(try TLSContext(client: configuration.tls)) } catch { made = .failure(error) }
            cached = made
            return made
        }
        switch result {
        case .success(let c): return c
        case .failure(let e): throw .transport(.tls(e))
        }
    }

    /// An exchange ended and the connection may carry another: back to the idle list.
    private func release(_ connection: HTTPClientConnection) {
        let waiter = pool.withLock { p -> CheckedContinuation<Void, Never>? in
            p.idle[connection.endpoint, default: []].append(connection)
            return p.waiters[connection.endpoint]?.isEmpty == false ? p.waiters[connection.endpoint]?.removeFirst() : nil
        }
        waiter?.resume()
    }

    /// A connection closed (or failed to open): its slot is free.
    private func closed(_ connection: HTTPClientConnection?, endpoint: HTTPEndpoint? = nil) {
        guard let endpoint = connection?.endpoint ?? endpoint else { return }
        let waiter = pool.withLock { p -> CheckedContinuation<Void, Never>? in
            if let connection { p.idle[endpoint]?.removeAll { $0 === connection } }
            p.open[endpoint, default: 1] -= 1
            return p.waiters[endpoint]?.isEmpty == false ? p.waiters[endpoint]?.removeFirst() : nil
        }
        waiter?.resume()
    }
}

/// Collects a whole response. Used on the connection's loop; the continuation hands the
/// result to the waiting task.
///
/// Safety of `@unchecked Sendable`: it is made by the task, then touched only on the loop.
private final class BufferingSink: HTTPResponseSink, @unchecked Sendable {
    var continuation: CheckedContinuation<Result<HTTPClientResponse, HTTPClientError>, Never>?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []

    func responseHead(_ head: HTTPResponseHead) { self.head = head }
    func responseBody(_ bytes: [UInt8]) { body += bytes }
    func responseEnd() {
        guard let head else { return responseFailed(.closedBeforeResponse) }
        finish(.success(HTTPClientResponse(head: head, body: body)))
    }
    func responseFailed(_ error: HTTPClientError) { finish(.failure(error)) }

    private func finish(_ result: Result<HTTPClientResponse, HTTPClientError>) {
        let c = continuation
        continuation = nil
        c?.resume(returning: result)
    }
}

/// Hands the head to the waiting task, then the body's pieces to the stream.
///
/// Safety of `@unchecked Sendable`: it is made by the task, then touched only on the loop
/// (the stream's termination handler reaches the connection through `loop.execute`).
private final class StreamingSink: HTTPResponseSink, @unchecked Sendable {
    var headContinuation: CheckedContinuation<Result<HTTPClientStream, HTTPClientError>, Never>?
    var connection: HTTPClientConnection?
    private var body: AsyncThrowingStream<[UInt8], any Error>.Continuation?
    private var ended = false

    func responseHead(_ head: HTTPResponseHead) {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        body = continuation
        let connection = self.connection
        // The cycle sink → continuation → handler → sink ends when the stream terminates.
        continuation.onTermination = { [self] _ in
            guard let connection else { return }
            // The reader stopped before the end: the rest of the body is not read, so the
            // connection cannot carry another request.
            _ = connection.loop?.execute {
                if !self.ended { connection.abort(.cancelled) }
            }
        }
        let c = headContinuation
        headContinuation = nil
        c?.resume(returning: .success(HTTPClientStream(head: head, body: stream)))
    }

    func responseBody(_ bytes: [UInt8]) { body?.yield(bytes) }

    func responseEnd() {
        ended = true
        if let c = headContinuation {
            headContinuation = nil
            c.resume(returning: .failure(.closedBeforeResponse))
        }
        body?.finish()
        body = nil
    }

    func responseFailed(_ error: HTTPClientError) {
        ended = true
        if let c = headContinuation {
            headContinuation = nil
            c.resume(returning: .failure(error))
            return
        }
        body?.finish(throwing: error)
        body = nil
    }
}
