@_spi(Fuzzing) @testable import FerryBLIP
import FerryTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Protocol/vectors/blip.hex by name.
let blipVectors = namedHexVectors("blip.hex")

struct MissingVector: Error { let name: String }

/// A golden vector by name; throws if the file lacks it.
func vec(_ name: String) throws -> [UInt8] {
    guard let v = blipVectors[name] else { throw MissingVector(name: name) }
    return v
}

func hexString(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

extension BLIPSession {
    /// Feeds a frame held in an array.
    func receive(_ frame: [UInt8]) throws(BLIPError) -> BLIPMessage? {
        try frame.withUnsafeBytes { raw in Result { () throws(BLIPError) in try receive(frame: raw) } }.get()
    }

    /// Every frame that can be sent now.
    func drain() throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        while let f = try nextFrame() { out.append(f) }
        return out
    }
}

/// A big body that deflate can still shrink (JSON-like with varying numbers).
func jsonLikeBody(_ n: Int) -> [UInt8] {
    var s = "["
    var i = 0
    while s.utf8.count < n { s += "{\"_id\":\"doc-\(i)\",\"rev\":\"1-\(i * 7919 % 100_000)\",\"v\":\(i % 13)},"; i += 1 }
    return Array(s.utf8.prefix(n))
}

/// Random-ish bytes that do not compress.
func noiseBody(_ n: Int, seed: UInt32 = 1) -> [UInt8] {
    var x = seed | 1
    return (0..<n).map { _ in x = x &* 1_103_515_245 &+ 12_345; return UInt8(truncatingIfNeeded: x >> 16) }
}

let blipPython: String? = {
    let c = ProcessInfo.processInfo.environment["FERRY_PYTHON"] ?? packageRoot.appendingPathComponent(".venv/bin/python").path
    if FileManager.default.isExecutableFile(atPath: c) { return c }
    return FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
}()

/// Runs the independent Python decoder/encoder on `input` lines; returns its output lines.
func runBLIPPython(_ args: [String], input: [String]) throws -> (Int32, [String]) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: blipPython ?? "/usr/bin/python3")
    p.arguments = [packageRoot.appendingPathComponent("Tests/FerryBLIPTests/Interop/blip_decode.py").path] + args
    let inPipe = Pipe(), outPipe = Pipe()
    p.standardInput = inPipe
    p.standardOutput = outPipe
    try p.run()
    let data = Data((input.joined(separator: "\n") + "\n").utf8)
    // Write on another thread: the output pipe must be drained while we write.
    let writer = Thread { inPipe.fileHandleForWriting.write(data); try? inPipe.fileHandleForWriting.close() }
    writer.start()
    let out = outPipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: out, as: UTF8.self).split(separator: "\n").map(String.init))
}
