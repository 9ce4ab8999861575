import FerryTestSupport
import Foundation
import Testing

/// Two `ferry-echo` processes over real sockets: a BLIP echo server and the mixed-workload client.
@Suite(.serialized) struct TwoProcessTests {
    static let echo = packageRoot.appendingPathComponent(".build/debug/ferry-echo").path

    static func serve() throws -> (Process, Int) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: echo)
        p.arguments = ["blip-serve", "--port", "0", "--app", "FerryTest", "--path", "/blip"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(out.fileHandleForReading.fileDescriptor, &byte, 1) == 1 && byte != 10 { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        let port = text.split(separator: ":").last.flatMap { Int($0.split(separator: "/").first ?? "") } ?? 0
        return (p, port)
    }

    static func client(_ args: [String]) throws -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: echo)
        p.arguments = ["blip-client", "--app", "FerryTest"] + args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: echo), "needs .build/debug/ferry-echo (swift build)"),
          .timeLimit(.minutes(5)))
    func thousandsOfMixedRequestsBetweenTwoProcesses() throws {
        let (server, port) = try Self.serve()
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        #expect(port > 0)
        let url = "ws://127.0.0.1:\(port)/blip"
        let (status, output) = try Self.client(["--url", url, "--count", "3000", "--sizes", "0,1,100,4000,16384,65536,300000"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("3000 passed, 0 failed"), "\(output)")
        let (bigStatus, bigOutput) = try Self.client(["--url", url, "--count", "4", "--sizes", "16777216", "--parallel", "4"])
        #expect(bigStatus == 0 && bigOutput.contains("4 passed, 0 failed"), "\(bigOutput)")
    }
}
