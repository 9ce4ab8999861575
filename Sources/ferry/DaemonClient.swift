import ArgumentParser
import FerryServer
import FerryStore
import Foundation

/// How the `ferry` command talks to a running daemon's REST API: found through the endpoint
/// file of its data (`--data DIR` or `--db FILE`, see `DaemonEndpoint`) with the daemon's
/// local token, or at `--url` with Basic credentials. Plain HTTP over a blocking socket: the
/// requests are few and small, and the daemon is usually on this machine.
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

    let host: String
    let port: Int
    let authorization: String?
    /// The base URL, for messages.
    let url: String

    /// The client for `url` (`http://host:port`) with optional Basic credentials or a bearer token.
    init(url: String, user: String? = nil, password: String? = nil, token: String? = nil) throws {
        guard let c = URLComponents(string: url), let host = c.host, c.scheme == "http" || c.scheme == "https" else {
            throw ValidationError("\(url) is not an http:// URL")
        }
        guard c.scheme == "http" else {
            throw ValidationError("\(url): this command speaks plain HTTP to the daemon; reach a TLS daemon through an http:// loopback listener")
        }
        self.host = host
        self.port = c.port ?? 80
        self.url = url
        if let token {
            authorization = "Bearer " + token
        } else if let user, let password {
            authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        } else {
            authorization = nil
        }
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
        let (host, port, authorization) = (host, port, authorization)
        let (status, body) = try await Task.detached {
            try Self.exchange(host: host, port: port, method: method, path: path, authorization: authorization,
                              body: json.map { CanonicalJSON.encode($0) })
        }.value
        let value = (try? JSONParser.parse(body, sizeLimit: body.count + 1)) ?? .string(String(decoding: body, as: UTF8.self))
        guard (200..<300).contains(status) else {
            let reason = value.objectValue?["reason"]?.stringValue ?? value.objectValue?["error"]?.stringValue ?? "\(value)"
            throw Failure.status(status, reason)
        }
        return value
    }

    /// One request on a new connection (`Connection: close`), read to the end.
    private static func exchange(host: String, port: Int, method: String, path: String, authorization: String?,
                                 body: [UInt8]?) throws -> (Int, [UInt8]) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw Failure.unreachable("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var fd: Int32 = -1
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let a = p {
            fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0 {
                var tv = timeval(tv_sec: 60, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                if connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { break }
                close(fd)
                fd = -1
            }
            p = a.pointee.ai_next
        }
        guard fd >= 0 else { throw Failure.unreachable("no daemon answers at \(host):\(port) (errno \(errno))") }
        defer { close(fd) }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\nAccept: application/json\r\n"
        if let authorization { head += "Authorization: \(authorization)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        let request = Array((head + "\r\n").utf8) + (body ?? [])
        var sent = 0
        while sent < request.count {
            let n = request.withUnsafeBytes { b in Glibc.send(fd, b.baseAddress.map { $0 + sent }, b.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.unreachable("the daemon at \(host):\(port) closed the connection (errno \(errno))")
            }
            sent += n
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.unreachable("no answer from the daemon at \(host):\(port) (errno \(errno))")
            }
            if n == 0 { break }
            response += buffer[0..<n]
            guard response.count <= 256 << 20 else { throw Failure.unreachable("the daemon's answer is over 256 MiB") }
        }
        return try parse(response)
    }

    /// Status and body of a whole HTTP/1.1 response (Content-Length, chunked, or to the end).
    static func parse(_ r: [UInt8]) throws -> (Int, [UInt8]) {
        let crlf2: [UInt8] = [13, 10, 13, 10]
        guard let end = r.firstRange(of: crlf2) else { throw Failure.unreachable("a truncated answer from the daemon") }
        let head = String(decoding: r[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure.unreachable("not an HTTP answer") }
        var body = Array(r[end.upperBound...])
        let chunked = head.dropFirst().contains { $0.lowercased().hasPrefix("transfer-encoding:") && $0.lowercased().contains("chunked") }
        if chunked {
            var out: [UInt8] = []
            var i = 0
            while let lineEnd = body[i...].firstRange(of: [13, 10] as [UInt8]) {
                let sizeText = String(decoding: body[i..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { break }
                if size == 0 { break }
                let start = lineEnd.upperBound
                guard start + size <= body.count else { break }
                out += body[start..<start + size]
                i = start + size + 2
                guard i <= body.count else { break }
            }
            body = out
        }
        return (status, body)
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
