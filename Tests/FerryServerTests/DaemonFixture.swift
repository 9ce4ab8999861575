import FerryBLIP
import FerryWebSocket
import FerryNet
import FerryServer
import FerryStore
import FerryTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A daemon on a temporary data directory, port 0, with the given users and anonymous policy.
final class DaemonFixture: Sendable {
    let dir = TempDir()
    let daemon: FerryDaemon

    init(users: [UserRecord] = [], allowAnonymous: Bool = false, anonymousRole: Role = .writer,
         databases: [String] = [], tls: TLSServerConfiguration? = nil, checks: PasswordCheckPool = .shared,
         failureLimits: FailureThrottle.Limits = FailureThrottle.Limits(), data: String? = nil,
         configure: (inout FerryDaemon.Configuration) -> Void = { _ in }) async throws {
        var policy = AccessControl.Policy()
        policy.allowAnonymous = allowAnonymous
        policy.anonymousRole = anonymousRole
        policy.failureLimits = failureLimits
        // The data directory served: `data` in `dir` unless given.
        let data = data ?? dir.path("data")
        let store = UserStore(dataDirectory: data)
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        if !users.isEmpty || !FileManager.default.fileExists(atPath: data + "/_users.json") {
            try store.save(Dictionary(users.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }))
        }
        var config = FerryDaemon.Configuration(location: .directory(data))
        config.port = 0
        config.tls = tls
        configure(&config)
        daemon = try await FerryDaemon.start(config, access: try AccessControl(store: store, policy: policy, checks: checks))
        for name in databases { _ = try daemon.registry.create(name) }
    }

    /// A user with a cheap hash (tests need not pay 600,000 iterations).
    /// BLIP's WebSocket settings with a 120 s handshake: the daemon authorizes an upgrade on
    /// the cooperative pool, which a full run beside a CPU hog (and other work) can keep busy
    /// past the default 10 s — what these tests check is the answer, not its speed.
    static var patientReplicationWebSocket: WebSocketConfiguration {
        var ws = BLIPConnection.webSocketConfiguration(app: "CBMobile_3")
        ws.handshakeTimeout = 120
        return ws
    }

    static func user(_ name: String, _ password: String, _ roles: [String: Role]) -> UserRecord {
        UserRecord(name: name, password: try? PasswordHash(password: password, iterations: 1000), roles: roles)
    }

    /// One request over a fresh connection.
    func request(_ method: String, _ path: String, json: String? = nil, body: [UInt8]? = nil,
                 headers: [(String, String)] = [], user: (String, String)? = nil) async throws -> HTTPTestResponse {
        var h = headers
        if let user { h.append(("Authorization", "Basic " + Data("\(user.0):\(user.1)".utf8).base64EncodedString())) }
        var bytes = body
        if let json {
            bytes = Array(json.utf8)
            if !h.contains(where: { $0.0.lowercased() == "content-type" }) { h.append(("Content-Type", "application/json")) }
        }
        return try await HTTPTestClient.send(port: daemon.port, method: method, path: path, headers: h, body: bytes)
    }

    func stop() async { await daemon.stop() }
}

/// A response as the test client read it.
struct HTTPTestResponse: Sendable {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSONValue? { try? JSONParser.parse(body) }
    var object: [String: JSONValue] { json?.objectValue ?? [:] }
}

/// A minimal blocking HTTP/1.1 client on a POSIX socket (one request, `Connection: close`),
/// run off the cooperative pool: the tests check the server's bytes, not a library's view.
enum HTTPTestClient {
    struct Failure: Error { let reason: String }

    static func send(port: Int, method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> HTTPTestResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (n, v) in headers { head += "\(n): \(v)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        let request = Array(head.utf8) + (body ?? [])
        let raw = try await exchange(port: port, request)
        return try parse(raw, method: method)
    }

    /// Writes `request` and reads until the server closes, or until `needle` has arrived (or
    /// `done` holds for what arrived), or for at most `timeout` seconds (SO_RCVTIMEO: a guard
    /// against a hang, not a wait).
    static func exchange(port: Int, _ request: [UInt8], until needle: [UInt8]? = nil, timeout: Int = 120,
                         halfClose: Bool = false, done: (@Sendable ([UInt8]) -> Bool)? = nil) async throws -> [UInt8] {
        let result: Result<[UInt8], Failure> = await offPool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return .failure(Failure(reason: "socket")) }
            defer { close(fd) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard rc == 0 else { return .failure(Failure(reason: "connect errno \(errno)")) }
            var tv = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var sent = 0
            while sent < request.count {
                let n = request.withUnsafeBytes { write(fd, $0.baseAddress! + sent, request.count - sent) }
                guard n > 0 else { return .failure(Failure(reason: "write")) }
                sent += n
            }
            if halfClose { shutdown(fd, Int32(SHUT_WR)) }
            var out: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &buf, buf.count)
                if n <= 0 { break }
                out += buf[..<n]
                if let needle, find(out, needle) != nil { break }
                if let done, done(out) { break }
            }
            return .success(out)
        }
        return try result.get()
    }

    /// Parses one response (Content-Length, chunked, or to the end).
    static func parse(_ raw: [UInt8], method: String) throws -> HTTPTestResponse {
        guard let end = find(raw, [13, 10, 13, 10]) else { throw Failure(reason: "no complete head in \(raw.count) bytes") }
        let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusLine = lines[0]
        var rest = Array(raw[(end + 4)...])
        // A 100 Continue comes before the real answer.
        if statusLine.contains(" 100 ") {
            return try parse(rest, method: method)
        }
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure(reason: "bad status line \(statusLine)") }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let get = { (n: String) in headers.first { $0.0.lowercased() == n }?.1 }
        var body: [UInt8]
        if method == "HEAD" || status == 204 || status == 304 {
            body = []
        } else if get("transfer-encoding")?.lowercased() == "chunked" {
            body = []
            while let lineEnd = find(rest, [13, 10]) {
                let size = Int(String(decoding: rest[..<lineEnd], as: UTF8.self), radix: 16) ?? 0
                if size == 0 { break }
                body += rest[(lineEnd + 2)..<(lineEnd + 2 + size)]
                rest = Array(rest[(lineEnd + 2 + size + 2)...])
            }
        } else if let length = get("content-length").flatMap({ Int($0) }) {
            body = Array(rest.prefix(length))
        } else {
            body = rest
        }
        return HTTPTestResponse(status: status, headers: headers, body: body)
    }

    static func find(_ hay: [UInt8], _ needle: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle { return i }
        return nil
    }
}
