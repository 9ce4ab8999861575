import ArgumentParser
import FerryHTTP
import FerryNet
import FerryServer
import FerryStore
import FoundationEssentials

/// How the `ferry` command talks to a running daemon's REST API: found through the endpoint
/// file of its data (`--data DIR` or `--db FILE`, see `DaemonEndpoint`) with the daemon's
/// local token, or at `--url` with Basic credentials; JSON over Ferry's one HTTP client
/// (plain or TLS, kept alive across a command's requests).
struct DaemonClient: Sendable {
    /// Why a request failed.
    enum Failure: Error, CustomStringConvertible {
        /// No daemon answers.
        case unreachable(String)
        /// The daemon answered with an error (CouchDB's shape).
        case status(Int, String)

        var description: String {
            switch self {
            case .unreachable(let s): return s
            case .status(let code, let reason): return "the daemon answered \(code): \(reason)"
            }
        }
    }

    let endpoint: HTTPEndpoint
    let authorization: String?
    /// The base URL, for messages.
    let url: String
    private let client: HTTPClient

    /// The client for `url` (`http(s)://host:port`) with optional Basic credentials or a bearer
    /// token; `tls` verifies an `https://` daemon (default: the system's trust store).
    init(url: String, user: String? = nil, password: String? = nil, token: String? = nil,
         tls: TLSClientConfiguration = TLSClientConfiguration()) throws {
        guard let (endpoint, _, _, _) = HTTPEndpoint.split(url) else { throw ValidationError("\(url) is not an http:// URL") }
        self.endpoint = endpoint
        self.url = url
        if let token {
            authorization = "Bearer " + token
        } else if let user, let password {
            authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        } else {
            authorization = nil
        }
        var configuration = HTTPClient.Configuration()
        configuration.tls = tls
        configuration.maxConnectionsPerEndpoint = 2
        client = HTTPClient(configuration: configuration)
    }

    /// The daemon serving `prefix` (`DaemonEndpoint.prefix`), or nil when none runs.
    static func running(prefix: String) throws -> DaemonClient? {
        guard let e = DaemonEndpoint.running(prefix) else { return nil }
        return try DaemonClient(url: e.url, token: e.token)
    }

    /// GET `path`, as JSON; a non-2xx answer throws.
    func get(_ path: String) async throws -> JSONValue { try await send("GET", path, json: nil) }

    /// Sends a request with an optional JSON body; returns the JSON answer; a non-2xx answer throws.
    func send(_ method: String, _ path: String, json: JSONValue?) async throws -> JSONValue {
        var headers: [(name: String, value: String)] = [("Accept", "application/json")]
        if let authorization { headers.append(("Authorization", authorization)) }
        if json != nil { headers.append(("Content-Type", "application/json")) }
        let request = HTTPClientRequest(method: method, endpoint: endpoint, target: path, headers: headers,
                                        body: json.map { CanonicalJSON.encode($0) })
        let response: HTTPClientResponse
        do { response = try await client.execute(request) } catch {
            switch error {
            case .transport(.connectionRefused), .transport(.resolutionFailed), .timedOut, .closedBeforeResponse:
                throw Failure.unreachable("no daemon answers at \(endpoint) (\(error))")
            default:
                throw Failure.unreachable("the daemon at \(endpoint): \(error)")
            }
        }
        let body = response.body
        let value = (try? JSONParser.parse(body, sizeLimit: body.count + 1)) ?? .string(String(decoding: body, as: UTF8.self))
        guard (200..<300).contains(response.status) else {
            let reason = value.objectValue?["reason"]?.stringValue ?? value.objectValue?["error"]?.stringValue ?? "\(value)"
            throw Failure.status(response.status, reason)
        }
        return value
    }
}

/// `--data DIR | --db FILE | --url URL` with `--user/--password`: which daemon a command
/// talks to.
struct DaemonOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The data directory a daemon serves (found through DIR/_daemon.json).", valueName: "dir"))
    var data: String?
    @Option(help: ArgumentHelp("The single database file a daemon serves (found through FILE.daemon.json).", valueName: "file"))
    var db: String?
    @Option(help: ArgumentHelp("The daemon's URL, http://host:port, when it is not found through its data.", valueName: "url"))
    var url: String?
    @Option(help: "User name for --url (a server admin).") var user: String?
    @Option(help: "The password for --user.") var password: String?

    func validate() throws {
        if [data, db, url].compactMap({ $0 }).count > 1 { throw ValidationError("give one of --data, --db and --url") }
        if (user == nil) != (password == nil) { throw ValidationError("--user and --password go together") }
    }

    /// The endpoint-file prefix of `--data`/`--db` (default: the data directory `.`, as `ferry serve --data .`).
    var prefix: String? {
        if let data { return DaemonEndpoint.prefix(for: .directory(data)) }
        if let db { return DaemonEndpoint.prefix(for: .single(name: "", path: db)) }
        return nil
    }

    /// The running daemon, or nil when none runs on the data given (never nil with --url).
    func client() throws -> DaemonClient? {
        if let url { return try DaemonClient(url: url, user: user, password: password) }
        guard let prefix else { throw ValidationError("give --data DIR, --db FILE or --url URL") }
        return try DaemonClient.running(prefix: prefix)
    }
}
