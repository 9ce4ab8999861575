import FerryNet
import FerryStore
import Foundation
import Synchronization

/// A one-request HTTP/1.1 client on Ferry's own transport (plain or TLS with the daemon's
/// client settings): how the daemon asks a static peer which databases it serves
/// (`GET /_all_dbs`) and who it is (`GET /`). Bodies are limited to 1 MiB.
enum PeerInfoClient {
    enum Failure: Error, CustomStringConvertible {
        case connect(NetError)
        case status(Int)
        case malformed(String)

        var description: String {
            switch self {
            case .connect(let e): return "cannot reach it: \(e)"
            case .status(401): return "it refused the group's credentials (401)"
            case .status(let s): return "it answered \(s)"
            case .malformed(let why): return "its answer is not understood: \(why)"
            }
        }
    }

    /// GETs `path` from `host`:`port` and parses the body as JSON.
    static func get(host: String, port: Int, path: String, tls: TLSClientConfiguration?, authorization: String?,
                    loop: EventLoop, timeout: Double = 10) async throws -> JSONValue {
        let connection: TCPConnection
        do { connection = try await TCPConnection.connect(host: host, port: port, on: loop, timeout: timeout) } catch {
            throw Failure.connect(error)
        }
        var head = "GET \(path) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\nAccept: application/json\r\nConnection: close\r\n"
        if let authorization { head += "Authorization: \(authorization)\r\n" }
        let request = Array((head + "\r\n").utf8)
        let collector = Collector()
        let bytes: [UInt8] = try await withCheckedThrowingContinuation { c in
            collector.continuation = c
            let accepted = loop.execute {
                do {
                    if let tls { try connection.startTLS(try TLSContext(client: tls), serverName: host) }
                } catch {
                    collector.finish(.failure(Failure.connect((error as? NetError) ?? .closed)))
                    connection.close()
                    return
                }
                connection.start(handler: collector)
                connection.write(request)
                collector.timer = loop.schedule(after: timeout) { connection.abort(.timedOut) }
            }
            if !accepted { collector.finish(.failure(Failure.connect(.loopShutDown))) }
        }
        guard let split = Self.headEnd(bytes) else { throw Failure.malformed("no HTTP head") }
        let headText = String(decoding: bytes[..<split], as: UTF8.self)
        let parts = headText.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure.malformed("bad status line") }
        guard (200..<300).contains(status) else { throw Failure.status(status) }
        let body = Array(bytes[(split + 4)...])
        do { return try JSONParser.parse(body, sizeLimit: Collector.limit) } catch { throw Failure.malformed("\(error)") }
    }

    private static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }

    /// Collects the answer until the server closes.
    ///
    /// Safety of `@unchecked Sendable`: `received`, `timer` and `continuation` are touched on
    /// the connection's loop only, after the continuation is set (before `execute`).
    private final class Collector: ConnectionHandler, @unchecked Sendable {
        static let limit = 1 << 20
        var received: [UInt8] = []
        var timer: TimerHandle?
        var continuation: CheckedContinuation<[UInt8], Error>?

        func finish(_ r: Result<[UInt8], Error>) {
            continuation?.resume(with: r)
            continuation = nil
        }

        func connectionRead(_ connection: TCPConnection, _ bytes: UnsafeMutableRawBufferPointer) {
            received.append(contentsOf: bytes)
            if received.count > Self.limit { connection.abort(nil); finish(.failure(Failure.malformed("over 1 MiB"))) }
        }

        func connectionWritabilityChanged(_ connection: TCPConnection, writable: Bool) {}
        func connectionInputClosed(_ connection: TCPConnection) {}

        func connectionClosed(_ connection: TCPConnection, error: NetError?) {
            if let timer { connection.loop.cancel(timer) }
            if let error, received.isEmpty { finish(.failure(Failure.connect(error))) } else { finish(.success(received)) }
        }
    }
}
