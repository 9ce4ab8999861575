import FerryHTTP
import FerryNet
import FerryStore

/// How the daemon asks a static peer which databases it serves (`GET /_all_dbs`) and who it is
/// (`GET /`): JSON over Ferry's one HTTP client, plain or TLS with the daemon's client settings.
/// Bodies are limited to 1 MiB.
enum PeerInfoClient {
    enum Failure: Error, CustomStringConvertible {
        case connect(HTTPClientError)
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

    /// The answers' size limit.
    static let limit = 1 << 20

    /// `GET /` and `GET /_all_dbs` of `host`:`port`, on one kept-alive connection.
    static func identity(host: String, port: Int, tls: TLSClientConfiguration?, authorization: String?,
                         timeout: Double = 10) async throws -> (info: JSONValue, databases: JSONValue) {
        var configuration = HTTPClient.Configuration()
        if let tls { configuration.tls = tls }
        configuration.connectTimeout = timeout
        configuration.readTimeout = timeout
        configuration.maxResponseSize = limit
        configuration.maxRedirects = 0
        configuration.maxConnectionsPerEndpoint = 1
        let client = HTTPClient(configuration: configuration)
        defer { client.closeIdleConnections() }
        let endpoint = HTTPEndpoint(secure: tls != nil, host: host, port: port)
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let authorization { headers.append(("Authorization", authorization)) }
        func get(_ path: String) async throws -> JSONValue {
            let response: HTTPClientResponse
            do { response = try await client.execute(HTTPClientRequest(method: "GET", endpoint: endpoint, target: path, headers: headers)) } catch {
                if case .malformedResponse(let e) = error { throw Failure.malformed(e.reason) }
                throw Failure.connect(error)
            }
            guard (200..<300).contains(response.status) else { throw Failure.status(response.status) }
            do { return try JSONParser.parse(response.body, sizeLimit: limit) } catch { throw Failure.malformed("\(error)") }
        }
        return (try await get("/"), try await get("/_all_dbs"))
    }
}
