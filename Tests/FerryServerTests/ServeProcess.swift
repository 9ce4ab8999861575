import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// A `ferry serve` child process (the binary built beside the tests) and `curl` as the REST
/// client no one here wrote.
final class ServeProcess: @unchecked Sendable {
    // @unchecked: `process` is set once in init and only read afterwards; Process itself is
    // thread-safe for terminate/waitUntilExit.
    static let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("ferry")

    let process: Process
    /// `http://127.0.0.1:PORT`
    let baseURL: String
    /// `ws://127.0.0.1:PORT`
    let wsURL: String

    /// Starts `ferry serve ARGS --port 0` and waits for its first line (it listens then).
    init(_ args: [String]) async throws {
        let p = Process()
        let out = Pipe()
        p.executableURL = Self.executable
        p.arguments = ["serve", "--port", "0"] + args
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let line = await Self.firstLine(of: out)
        guard let port = Self.port(inFirstLine: line) else {
            p.terminate()
            throw CurlFailure(reason: "ferry serve did not start: \(line)")
        }
        baseURL = "http://127.0.0.1:\(port)"
        wsURL = "ws://127.0.0.1:\(port)"
    }

    /// The port in `ferry serve`'s first line (its `ws://HOST:PORT/…` URL), if it has one.
    static func port(inFirstLine line: String) -> String? {
        guard let ws = line.split(separator: " ").first(where: { $0.hasPrefix("ws://") }) else { return nil }
        return ws.dropFirst("ws://".count).split(separator: "/").first?.split(separator: ":").last.map(String.init)
    }

    /// The first line a child writes to `pipe` (`ferry serve` writes it once it listens), read
    /// with read(2) off the cooperative pool (Foundation's buffered readers can hang on pipes).
    static func firstLine(of pipe: Pipe) async -> String {
        let fd = pipe.fileHandleForReading.fileDescriptor
        return await offPool { () -> String in
            var bytes: [UInt8] = []
            var c: UInt8 = 0
            while read(fd, &c, 1) == 1, c != 10 { bytes.append(c) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// SIGTERM, then waits for the exit; returns the status.
    @discardableResult
    func stop() async -> Int32 {
        process.terminate()
        let p = process
        return await offPool { p.waitUntilExit(); return p.terminationStatus }
    }
}

struct CurlFailure: Error { let reason: String }

/// Runs curl; returns the HTTP status and the body. `-s` quiet, `-w` appends the status.
func curl(_ args: [String]) async throws -> (status: Int, body: String) {
    let p = Process()
    let out = Pipe()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    p.arguments = ["-s", "-w", "\n%{http_code}"] + args
    p.standardOutput = out
    try p.run()
    let data = await offPool { out.fileHandleForReading.readDataToEndOfFile() }
    p.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard let nl = text.lastIndex(of: "\n"), let status = Int(text[text.index(after: nl)...]) else {
        throw CurlFailure(reason: "curl \(args): \(text)")
    }
    return (status, String(text[..<nl]))
}

/// The JSON object of a body.
func jsonObject(_ text: String) -> [String: JSONValue] {
    (try? JSONParser.parseObject(Array(text.utf8))) ?? [:]
}
