@testable import FerryBLIP
import Foundation
#if canImport(Glibc)
import Glibc
#endif

let blipPackageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Protocol/vectors/blip.hex by name.
let blipVectors: [String: [UInt8]] = {
    guard let text = try? String(contentsOf: blipPackageRoot.appendingPathComponent("Protocol/vectors/blip.hex"), encoding: .utf8) else { return [:] }
    var out: [String: [UInt8]] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else { continue }
        out[String(parts[0])] = blipHex(parts[1].trimmingCharacters(in: .whitespaces))
    }
    return out
}()

struct MissingVector: Error { let name: String }

/// A golden vector by name; throws if the file lacks it.
func vec(_ name: String) throws -> [UInt8] {
    guard let v = blipVectors[name] else { throw MissingVector(name: name) }
    return v
}

func blipHex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var it = s.utf8.makeIterator()
    func nib(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
    while let a = it.next(), let b = it.next() { out.append(nib(a) << 4 | nib(b)) }
    return out
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
    let c = ProcessInfo.processInfo.environment["FERRY_PYTHON"] ?? blipPackageRoot.appendingPathComponent(".venv/bin/python").path
    if FileManager.default.isExecutableFile(atPath: c) { return c }
    return FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : nil
}()

/// Runs the independent Python decoder/encoder on `input` lines; returns its output lines.
func runBLIPPython(_ args: [String], input: [String]) throws -> (Int32, [String]) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: blipPython ?? "/usr/bin/python3")
    p.arguments = [blipPackageRoot.appendingPathComponent("Tests/FerryBLIPTests/Interop/blip_decode.py").path] + args
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
